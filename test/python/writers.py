"""writers.py CASE FILE

Runs one case of a dataset file written inside the job while it is read,
under `augur run --policy reactive` (which copies a file on its first
read). Every read must see the bytes last written; each case prints "ok"
or fails with an AssertionError. The leader's progress is followed with
`augur stat --json` (AUGUR_BIN, AUGUR_JOB): a case waits until the leader
has refused to copy the file while it is written, so that a copy made
then, and served, would be caught.

Cases:
  before-copy   the writer's descriptor is opened before any copy exists,
                the file is read, then appended to
  fork-child    a forked child opens the file for writing and writes
  fork-shared   the parent opens it, forks, closes its own descriptor; the
                child writes through the inherited one
  other-process another process of the job (exec'd) holds it and writes
  exec-inherit  a descriptor passed to an exec'd child (pass_fds; CPython
                spawns with vfork), the parent's closed at once: the child
                writes through it
  posix-spawn   os.posix_spawn with the file dup2'd onto the child's stdout
  mmap          a shared writable mapping outlives its descriptor
  ftruncate     truncated through a descriptor opened O_RDWR
"""
import json
import mmap
import os
import subprocess
import sys
import time


def stat():
    out = subprocess.check_output([os.environ["AUGUR_BIN"], "stat", "--json", "--job", os.environ["AUGUR_JOB"]])
    return json.loads(out)


def wait(what, cond):
    deadline = time.monotonic() + 30
    while not cond(stat()):
        if time.monotonic() > deadline:
            raise AssertionError("the leader never %s: %s" % (what, json.dumps(stat())))
        time.sleep(0.01)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def refused(path, before):
    """Reads path (the leader then tries to copy it) and waits until it
    refused the copy, the file being written."""
    read(path)
    wait("refused to copy a file being written", lambda s: s["copies_held"] > before)


def copied_again(path, want):
    """Once the last writer is gone (closed, or reaped by the leader after
    its process exited), every read sees the new bytes, and the file is
    copied again: reads are soon served from the tier."""
    wait("released the writers", lambda s: s["writers"] == 0)
    deadline = time.monotonic() + 30
    while True:
        hits = stat()["tiers"][0]["hits"]
        assert read(path) == want
        if stat()["tiers"][0]["hits"] > hits:
            return
        if time.monotonic() > deadline:
            raise AssertionError("never served from the tier again: %s" % json.dumps(stat()))
        time.sleep(0.01)


def before_copy(path):
    held = stat()["copies_held"]
    w = open(path, "ab")
    w.write(b"A" * 1000)
    w.flush()
    refused(path, held)
    assert read(path) == b"A" * 1000
    w.write(b"B" * 10)
    w.flush()
    assert read(path) == b"A" * 1000 + b"B" * 10
    w.close()
    copied_again(path, b"A" * 1000 + b"B" * 10)


def fork_child(path):
    held = stat()["copies_held"]
    go, ready = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go[1])
        f = open(path, "ab")
        f.write(b"C")
        f.flush()
        os.write(ready[1], b"1")
        os.read(go[0], 1)
        f.write(b"D")
        f.close()
        os._exit(0)
    os.read(ready[0], 1)
    refused(path, held)
    assert read(path) == b"C"
    os.write(go[1], b"1")
    assert os.waitpid(pid, 0)[1] == 0
    copied_again(path, b"CD")


def fork_shared(path):
    held = stat()["copies_held"]
    go, ready = os.pipe(), os.pipe()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    pid = os.fork()
    if pid == 0:
        os.close(go[1])
        os.write(ready[1], b"1")  # registered: the fork handler ran before fork returned
        os.read(go[0], 1)
        os.write(fd, b"F")
        os._exit(0)
    # The child registers its descriptor in its fork handler: until then
    # the file has no writer, and a read may copy it (the child drops
    # that copy as it registers, before it can write).
    os.read(ready[0], 1)
    os.close(fd)  # the child still holds it
    refused(path, held)
    os.write(go[1], b"1")
    assert os.waitpid(pid, 0)[1] == 0
    copied_again(path, b"F")


CHILD = """
import os, sys
f = open(sys.argv[1], "ab")
print("open", flush=True)
sys.stdin.readline()
f.write(b"X" * 5)
f.close()
"""


def other_process(path):
    held = stat()["copies_held"]
    child = subprocess.Popen([sys.executable, "-c", CHILD, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout.readline() == b"open\n"
    refused(path, held)
    child.stdin.write(b"go\n")
    child.stdin.close()
    assert child.wait() == 0
    copied_again(path, b"X" * 5)


INHERIT = """
import os, sys
fd = int(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
os.write(fd, b"I" * 7)
"""


def exec_inherit(path):
    held = stat()["copies_held"]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    child = subprocess.Popen([sys.executable, "-c", INHERIT, str(fd)], pass_fds=(fd,),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    os.close(fd)  # at once, maybe before the child's shim has started (vfork)
    assert child.stdout.readline() == b"ready\n"
    refused(path, held)
    child.stdin.write(b"go\n")
    child.stdin.close()
    assert child.wait() == 0
    copied_again(path, b"I" * 7)


def posix_spawn(path):
    with open(path, "wb") as out:
        pid = os.posix_spawn(sys.executable, [sys.executable, "-c", "import sys; sys.stdout.write('hello')"],
                             os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1)])
        assert os.waitpid(pid, 0)[1] == 0
    copied_again(path, b"hello")


def mapped(path):
    held = stat()["copies_held"]
    fd = os.open(path, os.O_RDWR)
    m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)  # the mapping still writes the file
    refused(path, held)
    m[0:3] = b"MAP"
    m.flush()
    assert read(path)[:3] == b"MAP"
    m.close()
    copied_again(path, b"MAP" + b"m" * 97)


def truncated(path):
    held = stat()["copies_held"]
    fd = os.open(path, os.O_RDWR)
    refused(path, held)
    os.ftruncate(fd, 10)
    assert read(path) == b"t" * 10
    os.close(fd)
    copied_again(path, b"t" * 10)


CASES = {"before-copy": before_copy, "fork-child": fork_child, "fork-shared": fork_shared,
         "other-process": other_process, "exec-inherit": exec_inherit, "posix-spawn": posix_spawn,
         "mmap": mapped, "ftruncate": truncated}

if __name__ == "__main__":
    CASES[sys.argv[1]](sys.argv[2])
    print("ok")
