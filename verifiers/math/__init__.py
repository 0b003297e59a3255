"""Math answer equivalence (under construction: see issue 3)."""
