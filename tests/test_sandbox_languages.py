"""C, C++, Java, JavaScript, Go and Rust in the Docker sandbox: the same rules as Python.

Per language, on the real engine: a correct program passes, a wrong one fails, a compile
error is `compile_error` (parse_error for the verifier) with the compiler's message, the
binary is built once per job, and a fork bomb, a memory bomb, an infinite loop, an output
flood, a crash after the right output and a program that reads past its input all get the
verdict the trusted side computes. A correct program that leaves a child running passes:
the child is killed when the main process exits, and counted. Without the languages image these
tests skip (`rlvr sandbox build --languages`), except under CI, where they must run.
"""

from __future__ import annotations

import os

import pytest
from conftest import require_docker
from host_listener import arrived, bridge_gateway, listening

from rlvr.sandbox.pool import SandboxPool, SandboxUnavailable
from rlvr.sandbox.protocol import Job
from rlvr.verifiers.code import CodeVerifier

pytestmark = pytest.mark.docker

CASES = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}, {"input": "-4 4\n", "output": "0\n"}]

# Each language: programs by role. "reads_past" reads the pair, prints the sum, then reads again.
PROGRAMS = {
    "c": {
        "good": '#include <stdio.h>\nint main(void){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n",a+b);return 0;}\n',
        "wrong": '#include <stdio.h>\nint main(void){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n",a*b);return 0;}\n',
        "syntax": "int main(void){ return undeclared_name; }\n",
        "fork_bomb": "#include <unistd.h>\nint main(void){for(;;) fork();}\n",
        "memory_bomb": "#include <stdlib.h>\n#include <string.h>\nint main(void){for(;;){char*p=malloc(1<<24);"
                       "if(!p) return 3; memset(p,1,1<<24);}}\n",
        "infinite_loop": "int main(void){volatile long i=0; for(;;) i++;}\n",
        "output_flood": '#include <stdio.h>\nint main(void){for(;;) fputs("spamspamspamspam", stdout);}\n',
        "lingering_child": '#include <stdio.h>\n#include <unistd.h>\nint main(void){long a,b;scanf("%ld %ld",&a,&b);'
                           'printf("%ld\\n",a+b);fflush(stdout);if(fork()==0){sleep(1000);}return 0;}\n',
        "crash_after_output": '#include <stdio.h>\n#include <stdlib.h>\nint main(void){long a,b;scanf("%ld %ld",&a,&b);'
                              'printf("%ld\\n",a+b);fflush(stdout);abort();}\n',
        "reads_past": '#include <stdio.h>\nint main(void){long a,b,c;scanf("%ld %ld",&a,&b);printf("%ld\\n",a+b);'
                      'return scanf("%ld",&c)==EOF?0:1;}\n',
    },
    "cpp": {
        "good": "#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}\n",
        "wrong": "#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a-b<<'\\n';}\n",
        "syntax": "#include <vector>\nint main(){ std::vector<int> v = 3; }\n",
        "fork_bomb": "#include <unistd.h>\nint main(){for(;;) fork();}\n",
        "memory_bomb": "#include <vector>\n#include <cstring>\nint main(){std::vector<char*> v;for(;;){char*p=new char[1<<24];"
                       "std::memset(p,1,1<<24);v.push_back(p);}}\n",
        "infinite_loop": "int main(){volatile long i=0; for(;;) i++;}\n",
        "output_flood": "#include <iostream>\nint main(){for(;;) std::cout<<\"spamspamspamspam\";}\n",
        "lingering_child": "#include <iostream>\n#include <unistd.h>\nint main(){long a,b;std::cin>>a>>b;"
                           "std::cout<<a+b<<std::endl;if(fork()==0){sleep(1000);}}\n",
        "crash_after_output": "#include <iostream>\n#include <stdexcept>\nint main(){long a,b;std::cin>>a>>b;"
                              "std::cout<<a+b<<std::endl;throw std::runtime_error(\"boom\");}\n",
        "reads_past": "#include <iostream>\nint main(){long a,b,c;std::cin>>a>>b;std::cout<<a+b<<'\\n';"
                      "return (std::cin>>c)?1:0;}\n",
    },
    "java": {
        "good": "import java.util.*;\npublic class Main{public static void main(String[] x){Scanner s=new Scanner(System.in);"
                "long a=s.nextLong(),b=s.nextLong();System.out.println(a+b);}}\n",
        "wrong": "import java.util.*;\npublic class Main{public static void main(String[] x){Scanner s=new Scanner(System.in);"
                 "long a=s.nextLong(),b=s.nextLong();System.out.println(a);}}\n",
        "syntax": "public class Main{public static void main(String[] x){int y = \"text\";}}\n",
        "fork_bomb": "public class Main{public static void main(String[] x) throws Exception{for(;;){"
                     "try{new ProcessBuilder(\"sleep\",\"100\").start();}catch(Throwable e){}}}}\n",
        "memory_bomb": "import java.util.*;\npublic class Main{public static void main(String[] x){List<long[]> l=new ArrayList<>();"
                       "for(;;) l.add(new long[1<<20]);}}\n",
        "infinite_loop": "public class Main{public static void main(String[] x){long i=0;for(;;) i++;}}\n",
        "output_flood": "public class Main{public static void main(String[] x){for(;;) System.out.print(\"spamspamspam\");}}\n",
        "lingering_child": "import java.util.*;\npublic class Main{public static void main(String[] x) throws Exception{"
                           "Scanner s=new Scanner(System.in);long a=s.nextLong(),b=s.nextLong();System.out.println(a+b);"
                           "System.out.flush();new ProcessBuilder(\"sleep\",\"1000\").start();}}\n",
        "crash_after_output": "import java.util.*;\npublic class Main{public static void main(String[] x){"
                              "Scanner s=new Scanner(System.in);long a=s.nextLong(),b=s.nextLong();System.out.println(a+b);"
                              "throw new IllegalStateException(\"boom\");}}\n",
        "reads_past": "import java.util.*;\npublic class Main{public static void main(String[] x){Scanner s=new Scanner(System.in);"
                      "long a=s.nextLong(),b=s.nextLong();System.out.println(a+b);s.nextLong();}}\n",
    },
    "javascript": {
        "good": "const [a,b]=require('fs').readFileSync(0,'utf8').trim().split(/\\s+/).map(Number);console.log(a+b);\n",
        "wrong": "const [a,b]=require('fs').readFileSync(0,'utf8').trim().split(/\\s+/).map(Number);console.log(a+b+1);\n",
        "syntax": "const x = ;\n",
        "fork_bomb": "const cp=require('child_process');for(;;){try{cp.spawn('sleep',['100']);}catch(e){}}\n",
        "memory_bomb": "const hog=[];for(;;) hog.push(new Array(1<<20).fill(1.5));\n",
        "infinite_loop": "for(;;){}\n",
        "output_flood": "const s='spam'.repeat(4096);for(;;) require('fs').writeSync(1,s);\n",
        "lingering_child": "const [a,b]=require('fs').readFileSync(0,'utf8').trim().split(/\\s+/).map(Number);"
                           "console.log(a+b);require('child_process').spawn('sleep',['1000'],"
                           "{detached:true,stdio:'ignore'}).unref();\n",
        "crash_after_output": "const [a,b]=require('fs').readFileSync(0,'utf8').trim().split(/\\s+/).map(Number);"
                              "console.log(a+b);null.boom();\n",
        "reads_past": "const fs=require('fs');const [a,b]=fs.readFileSync(0,'utf8').trim().split(/\\s+/).map(Number);"
                      "console.log(a+b);if(fs.readFileSync(0,'utf8')!=='') process.exit(1);\n",
    },
    "go": {
        "good": 'package main\nimport "fmt"\nfunc main(){var a,b int64;fmt.Scan(&a,&b);fmt.Println(a+b)}\n',
        "wrong": 'package main\nimport "fmt"\nfunc main(){var a,b int64;fmt.Scan(&a,&b);fmt.Println(a+b+b)}\n',
        "syntax": 'package main\nimport "fmt"\nfunc main(){ fmt.Println(undefinedName) }\n',
        "fork_bomb": 'package main\nimport "os/exec"\nfunc main(){for{exec.Command("sleep","100").Start()}}\n',
        "memory_bomb": "package main\nfunc main(){var hog [][]byte;for{b:=make([]byte,1<<24);for i:=range b{b[i]=1};"
                       "hog=append(hog,b)}}\n",
        "infinite_loop": "package main\nfunc main(){for{}}\n",
        "output_flood": 'package main\nimport "os"\nfunc main(){b:=[]byte("spamspamspamspam");for{os.Stdout.Write(b)}}\n',
        "lingering_child": 'package main\nimport ("fmt";"os/exec")\nfunc main(){var a,b int64;fmt.Scan(&a,&b);'
                           'fmt.Println(a+b);exec.Command("sleep","1000").Start()}\n',
        "crash_after_output": 'package main\nimport "fmt"\nfunc main(){var a,b int64;fmt.Scan(&a,&b);fmt.Println(a+b);'
                              'var m map[string]int;m["x"]=1}\n',
        "reads_past": 'package main\nimport "fmt"\nfunc main(){var a,b,c int64;fmt.Scan(&a,&b);fmt.Println(a+b);'
                      'if _,err:=fmt.Scan(&c);err==nil{panic("more input?")}}\n',
    },
    "rust": {
        "good": "use std::io::*;\nfn main(){let mut s=String::new();stdin().read_to_string(&mut s).unwrap();"
                "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();println!(\"{}\",v[0]+v[1]);}\n",
        "wrong": "use std::io::*;\nfn main(){let mut s=String::new();stdin().read_to_string(&mut s).unwrap();"
                 "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();println!(\"{}\",v[1]);}\n",
        "syntax": "fn main(){ let x: i32 = \"text\"; }\n",
        "fork_bomb": "fn main(){loop{let _=std::process::Command::new(\"sleep\").arg(\"100\").spawn();}}\n",
        "memory_bomb": "fn main(){let mut hog=Vec::new();loop{hog.push(vec![1u8;1<<24]);}}\n",
        "infinite_loop": "fn main(){let mut i:u64=1;while i!=0{i=i.wrapping_add(2);}println!(\"{}\",i);}\n",
        "output_flood": "use std::io::Write;\nfn main(){let mut o=std::io::stdout();loop{let _=o.write_all(b\"spamspamspam\");}}\n",
        "lingering_child": "use std::io::*;\nfn main(){let mut s=String::new();stdin().read_to_string(&mut s).unwrap();"
                           "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();"
                           "println!(\"{}\",v[0]+v[1]);std::process::Command::new(\"sleep\").arg(\"1000\").spawn().unwrap();}\n",
        "crash_after_output": "use std::io::*;\nfn main(){let mut s=String::new();stdin().read_to_string(&mut s).unwrap();"
                              "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();"
                              "println!(\"{}\",v[0]+v[1]);panic!(\"boom\");}\n",
        "reads_past": "use std::io::*;\nfn main(){let mut l=String::new();stdin().read_line(&mut l).unwrap();"
                      "let v:Vec<i64>=l.split_whitespace().map(|x|x.parse().unwrap()).collect();println!(\"{}\",v[0]+v[1]);"
                      "let mut more=String::new();if stdin().read_line(&mut more).unwrap()!=0{std::process::exit(1);}}\n",
    },
}
# The binary is built once: every run compares its own executable with the one the first run saw.
SAME_BINARY = ('#include <stdio.h>\n#include <sys/stat.h>\nint main(void){struct stat s;stat("main",&s);'
               'FILE*f=fopen("seen","r");if(!f){f=fopen("seen","w");fprintf(f,"%ld %ld",(long)s.st_ino,'
               '(long)s.st_mtim.tv_nsec);fclose(f);puts("same");return 0;}long i,n;fscanf(f,"%ld %ld",&i,&n);'
               'puts(i==(long)s.st_ino&&n==(long)s.st_mtim.tv_nsec?"same":"rebuilt");return 0;}\n')
# The role's expected status, and what the per-test verdict of the first case must say.
EXPECTED = {
    "good": ("passed", None),
    "wrong": ("failed", "wrong output"),
    "syntax": ("compile_error", "not run: compile error"),
    # A runtime that cannot start a thread once the pids limit is reached (Go) exits with an error.
    "fork_bomb": (("timeout", "failed"), ("timeout", "runtime error")),
    "memory_bomb": ("memory", "memory limit exceeded"),
    "infinite_loop": ("timeout", "timeout"),
    "output_flood": ("failed", "output limit exceeded"),
    "lingering_child": ("passed", None),  # the main process ended: what it left is killed, not judged
    "crash_after_output": (("crash", "failed"), "runtime error"),
    "reads_past": ("passed", None),
}
READS_PAST = {"java": ("failed", "runtime error")}  # Scanner throws at the end of input
# Roles expected to time out get a short wall clock; the rest a long one, so that a JVM
# starting on a loaded machine is never mistaken for a timeout.
TIMEOUTS = {"fork_bomb": 3.0, "infinite_loop": 3.0}


def _language_pool():
    from rlvr.sandbox.image import docker_client, image_exists, image_tag

    tag = image_tag(languages=True)
    try:
        present = image_exists(docker_client(timeout=30), tag)
    except Exception as exc:
        raise SandboxUnavailable(f"no Docker engine: {exc}") from None
    if not present and not os.environ.get("CI"):
        pytest.skip(f"{tag} is missing: run `rlvr sandbox build --languages`")
    return SandboxPool(backend="docker", size=2, image=tag)


@pytest.fixture(scope="module")
def pool():
    p = require_docker(_language_pool)
    yield p
    p.close()


@pytest.mark.parametrize("language", list(PROGRAMS))
def test_every_role_gets_its_verdict(pool, language):
    roles = list(PROGRAMS[language])
    jobs = [Job(code=PROGRAMS[language][r], io_tests=CASES, language=language, timeout=TIMEOUTS.get(r, 15.0))
            for r in roles]
    results = pool.run_batch(jobs)
    for role, result in zip(roles, results):
        status, verdict = READS_PAST.get(language) if role == "reads_past" and language in READS_PAST else EXPECTED[role]
        statuses = status if isinstance(status, tuple) else (status,)
        assert result.status in statuses, (language, role, result.status, result.error, result.tests[:1])
        first = result.tests[0]["error"]
        assert (first is None) if verdict is None else first.startswith(verdict), (language, role, result.tests[:1])
        if role not in ("good", "reads_past", "lingering_child"):
            assert result.passed == 0, (language, role, result.passed)
    by_role = dict(zip(roles, results))
    assert by_role["syntax"].error.startswith("compile error: ") and len(by_role["syntax"].error) > 20
    flood = by_role["output_flood"]
    assert flood.truncated and "truncated" in flood.stdout and len(flood.stdout) < 70_000
    assert by_role["memory_bomb"].tainted, language
    # A few processes are cleaned at once and the container serves on. (A fork bomb is replaced or not by how
    # many processes it had made: a JVM's threads use up the pids limit at a handful.)
    for role in ("infinite_loop", "lingering_child"):
        assert not by_role[role].tainted, (language, role)
    assert by_role["lingering_child"].leftovers == len(CASES), (language, by_role["lingering_child"].leftovers)
    again = pool.run_batch([Job(code=PROGRAMS[language]["good"], io_tests=CASES, language=language)] * 2)
    assert [r.status for r in again] == ["passed", "passed"], [r.error for r in again]


def test_the_binary_is_compiled_once_per_job(pool):
    result = pool.run(Job(code=SAME_BINARY, io_tests=[{"input": "", "output": "same\n"}] * 4, language="c"))
    assert (result.status, result.passed) == ("passed", 4), result.tests


# Connects to the host's address on Docker's bridge, says hello, prints whether it got through.
REACH_C = ('#include <stdio.h>\n#include <unistd.h>\n#include <sys/socket.h>\n#include <netinet/in.h>\n'
           '#include <arpa/inet.h>\nint main(void){int s=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in a={0};'
           'a.sin_family=AF_INET;a.sin_port=htons(PORT);inet_pton(AF_INET,"HOST",&a.sin_addr);'
           'if(connect(s,(struct sockaddr*)&a,sizeof a)!=0){puts("isolated");return 0;}'
           'write(s,"TAG",3);puts("reached");return 0;}\n')


def test_no_network_in_compiled_programs(pool):
    host = bridge_gateway(pool._client)
    with listening() as (port, received):
        code = REACH_C.replace("PORT", str(port)).replace("HOST", host)
        result = pool.run(Job(code=code.replace("TAG", "box"), io_tests=[{"input": "", "output": "isolated\n"}],
                              language="c"))
        assert result.status == "passed", result.tests
        # The same program in the same image with networking reaches the listener.
        bridged = pool._client.containers.run(
            pool.image, ["sh", "-c", 'cd /tmp && printf "%s" "$SRC" > m.c && gcc -o m m.c && ./m'],
            environment={"SRC": code.replace("TAG", "net")}, network_mode="bridge", remove=True)
        assert bridged.decode() == "reached\n"
        assert arrived(received, 1) == ["net"]


def test_compile_limits_hold(pool):
    # A template that recurses without end: the compiler gives up (depth limit) or the compile
    # time limit stops it; either way the job is a compile error, not a hang.
    code = "template<int N> struct F { static const int v = F<N + 1>::v; };\nint main(){ return F<0>::v; }\n"
    result = pool.run(Job(code=code, io_tests=CASES, language="cpp", compile_timeout=5.0))
    assert result.status == "compile_error" and result.passed == 0
    assert "compile error" in result.error


def test_verifier_scores_other_languages_and_keeps_the_compiler_message(pool):
    verifier = CodeVerifier(timeout=4.0, image=pool.image, language="cpp")
    good = verifier.score(f"Here:\n```cpp\n{PROGRAMS['cpp']['good']}```\n", io_tests=CASES)
    assert good.value == 1.0, good.info
    bad = verifier.score(f"```cpp\n{PROGRAMS['cpp']['syntax']}```", io_tests=CASES)
    assert (bad.value, bad.reason) == (0.0, "parse_error")
    assert "error" in bad.info["error"] and bad.info["status"] == "compile_error"
    rust = verifier.score(f"```rust\n{PROGRAMS['rust']['good']}```", io_tests=CASES, language="rust")
    assert rust.value == 1.0, rust.info
    python_block = verifier.score("```python\nprint(sum(map(int, input().split())))\n```", io_tests=CASES)
    assert python_block.reason == "parse_error"  # a C++ task answered in Python: the whole text is not C++


def test_stdio_env_takes_a_language_and_its_prompt_names_it(pool):
    import gymnasium as gym

    import rlvr.envs  # noqa: F401
    from rlvr.envs import score_groups
    from rlvr.envs.tasks_stdio import StdioTasks

    env = gym.make("rlvr/StdioCode-v0", language="c++")
    observation, _ = env.reset(options={"index": 0})
    task = env.unwrapped.task
    assert task.task_id == "stdio/sum_list" and task.fields["language"] == "cpp"
    assert "C++" in str(observation) and "```cpp" in env.unwrapped.source.system_hint
    solution = ("```cpp\n#include <iostream>\nint main(){long n,x,s=0;std::cin>>n;"
                "for(long i=0;i<n&&std::cin>>x;i++)s+=x;std::cout<<s<<'\\n';}\n```")
    constant = "```cpp\n#include <cstdio>\nint main(){puts(\"6\");}\n```"
    python = "```python\nn = int(input())\nprint(sum(map(int, input().split()[:n])) if n else 0)\n```"
    [[right, wrong, other]] = score_groups([env], [[solution, constant, python]])
    assert right[0] == 1.0 and wrong[0] < 1.0
    assert other[0] == 0.0 and other[1]["score"]["reason"] == "parse_error"  # Python is not C++
    with pytest.raises(ValueError, match="language must be one of"):
        StdioTasks(language="cobol")
