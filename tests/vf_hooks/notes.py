from pathlib import Path

import verifiers.v1 as vf

NOTE = "note.txt"


class NotesToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "notes"

    @vf.tool
    def read(self) -> str:
        """Read the note left for you."""
        return Path(NOTE).read_text()  # colocated: in the task runtime, where setup wrote it


if __name__ == "__main__":
    NotesToolset.run()
