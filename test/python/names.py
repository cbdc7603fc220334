"""One change of the namespace, or a write by another name, made inside a
job after the file's copies were served: names.py ROOT OUT CASE CHECK...

Reads ROOT/d/f.bin three times (served from the tier, which holds a copy
of every file), makes the change CASE, then prints, for each path CHECK
(relative to ROOT), what an open of it reads now: the SHA-256 of its
bytes, ENOENT or EISDIR. test/names_test.go compares each with what the
kernel says the path holds. OUT is a scratch directory outside the root.
"""
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys

root, out, case = sys.argv[1], sys.argv[2], sys.argv[3]
checks = sys.argv[4:]
d = os.path.join(root, 'd')
p = os.path.join(d, 'f.bin')
new = b'new bytes, written after the copy was served\n' * 50

# ctypes.CDLL(None) finds each name in the process's global scope: the
# preload's wrapper first, as any call through the PLT does.
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
SYS_unlink, SYS_openat = 87, 257


def digest(path):
    try:
        with open(path, 'rb') as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return 'ENOENT'
    except IsADirectoryError:
        return 'EISDIR'


def ok(r):
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def raw_dirfd(path):
    """A directory descriptor opened by a system call the preload does
    not see, as one opened before the job's roots were known."""
    fd = libc.syscall(SYS_openat, AT_FDCWD, path.encode(), os.O_RDONLY | os.O_DIRECTORY)
    if fd < 0:
        raise OSError(ctypes.get_errno(), 'openat')
    return fd


def write_through(path):
    with open(path, 'r+b') as f:
        f.write(new)


for _ in range(3):
    digest(p)

if case == 'unlinkat-dirfd':
    fd = os.open(d, os.O_RDONLY)
    os.unlink('f.bin', dir_fd=fd)
elif case == 'unlinkat-raw-dirfd':
    os.unlink('f.bin', dir_fd=raw_dirfd(d))
elif case == 'unlinkat-dirfd-above':
    fd = os.open(os.path.dirname(root), os.O_RDONLY)
    os.unlink(os.path.join(os.path.basename(root), 'd', 'f.bin'), dir_fd=fd)
elif case == 'rmtree':
    shutil.rmtree(d)
elif case == 'rename-dir':
    os.rename(d, os.path.join(root, 'd2'))
elif case == 'rename-root':
    os.rename(root, root + '.moved')
    os.mkdir(root)
    os.mkdir(d)
    with open(p, 'wb') as f:
        f.write(new)
    os.rename(root + '.moved', os.path.join(out, 'old-root'))
elif case == 'mv-dir':
    subprocess.run(['mv', d, os.path.join(root, 'd2')], check=True)
elif case == 'rename-dirfd':
    fd = os.open(d, os.O_RDONLY)
    os.rename('f.bin', 'g.bin', src_dir_fd=fd, dst_dir_fd=fd)
elif case == 'replace-dirfd':
    fd = os.open(d, os.O_RDONLY)
    tmp = os.open('f.tmp', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(tmp, new)
    os.close(tmp)
    os.replace('f.tmp', 'f.bin', src_dir_fd=fd, dst_dir_fd=fd)
elif case == 'renameat2-exchange':
    ok(libc.renameat2(AT_FDCWD, p.encode(), AT_FDCWD, os.path.join(d, 'g.bin').encode(), RENAME_EXCHANGE))
elif case == 'renameat2-exchange-dirs':
    ok(libc.renameat2(AT_FDCWD, d.encode(), AT_FDCWD, os.path.join(root, 'e').encode(), RENAME_EXCHANGE))
elif case == 'renameat2-noreplace':
    ok(libc.renameat2(AT_FDCWD, p.encode(), AT_FDCWD, os.path.join(d, 'n.bin').encode(), RENAME_NOREPLACE))
elif case == 'symlink-over':
    os.symlink(os.path.join(d, 'g.bin'), os.path.join(d, 'f.lnk'))
    os.rename(os.path.join(d, 'f.lnk'), p)
elif case == 'link-write':
    q = os.path.join(out, 'q')
    os.link(p, q)
    write_through(q)
elif case == 'linkat-dirfd-write':
    fd = os.open(d, os.O_RDONLY)
    os.link('f.bin', 'f.hard', src_dir_fd=fd, dst_dir_fd=fd)
    write_through(os.path.join(d, 'f.hard'))
elif case == 'alias-write':
    alias = os.path.join(out, 'alias')
    os.symlink(d, alias)
    write_through(os.path.join(alias, 'f.bin'))
elif case == 'alias-truncate':
    alias = os.path.join(out, 'alias')
    os.symlink(d, alias)
    os.truncate(os.path.join(alias, 'f.bin'), 100)
elif case == 'alias-unlink':
    alias = os.path.join(out, 'alias')
    os.symlink(d, alias)
    os.unlink(os.path.join(alias, 'f.bin'))
elif case == 'alias-rename-dir':
    alias = os.path.join(out, 'alias')
    os.symlink(root, alias)
    os.rename(os.path.join(alias, 'd'), os.path.join(alias, 'd2'))
elif case == 'remove':
    ok(libc.remove(p.encode()))
elif case == 'rmdir':
    # The files go by a system call the preload does not see (as by a
    # process outside the job); the directory's removal inside the job
    # must take their copies along.
    for name in os.listdir(d):
        ok(libc.syscall(SYS_unlink, os.path.join(d, name).encode()))
    os.rmdir(d)
elif case == 'mmap-alias-write':
    import mmap
    alias = os.path.join(out, 'alias')
    os.symlink(d, alias)
    fd = os.open(os.path.join(alias, 'f.bin'), os.O_RDWR)
    m = mmap.mmap(fd, 0)
    m[:len(b'mapped')] = b'mapped'
    m.flush()
    m.close()
    os.close(fd)
elif case == 'bind-write':
    write_through(os.path.join(os.environ['BIND'], 'f.bin'))
else:
    sys.exit('no case ' + case)

for c in checks:
    print(digest(os.path.join(root, c)))
