/*
 * invalidate.c — taking copies out of service when their file changes:
 * a write open, truncate, unlink or rename of a dataset file by any
 * process of the job removes its tier copies before the call goes on, a
 * directory renamed or removed takes every copy under it along, and a
 * change made to a copied file through another name (a hard link, a
 * symlink, a bind mount, a directory descriptor) marks its copies stale
 * (writers.c). No process is then served bytes the path no longer names.
 */
#include "internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

/* copy_ident reads the source identity recorded on the copy at tp
 * (tiering.IdentXattr). It returns 1 with *id set, 0 when the copy has
 * none, and -1 when there is no copy at tp. */
static int copy_ident(const char *tp, struct augur_src_ident *id)
{
	*id = (struct augur_src_ident){0};
	ssize_t n = lgetxattr(tp, AUGUR_IDENT_XATTR, id, sizeof(*id));
	if (n >= 16)
		return 1;
	return n < 0 && (errno == ENOENT || errno == ENOTDIR) ? -1 : 0;
}

/* augur_invalidate_abs removes every tier copy of abs. Any process may
 * do it: a stale copy must disappear before the writer's open returns.
 * It first moves the file's gen, so that a copy being made now is
 * discarded rather than published (struct augur_writes), and last waits
 * for a publication under way to settle (augur_await_publishers). It removes
 * through the tier's directory, opened without following a symlink and
 * checked, not by the whole path: a tier swapped for a symlink must not
 * lead the removal out of the tier. */
AUGUR_HIDDEN void augur_invalidate_abs(const char *abs)
{
	augur_bump_gen(abs);
	augur_remove_copies(abs, "files");
	augur_big_invalidate(abs);
	augur_await_publishers(abs);
	if (augur_st.seg)
		augur_emit(AUGUR_EV_INVALIDATE, -1, -1, 0, abs, 0);
}

/* augur_remove_copies removes abs's copies under each tier's directory
 * dir ("files": whole copies; "blocks": blocks files), with their
 * entries in the identity table. */
AUGUR_HIDDEN void augur_remove_copies(const char *abs, const char *in)
{
	char tp[PATH_MAX];
	struct augur_src_ident id;
	for (int t = 0; t < augur_st.ntiers; t++) {
		if (augur_tier_path_in(t, in, abs, tp, sizeof(tp)) < 0 || !REAL(unlinkat))
			continue;
		/* Asked by path first, a read: most tiers hold no copy, and
		 * that answer costs one call rather than three. A copy
		 * published after it is taken back by its publisher: gen
		 * moved above. */
		int has = copy_ident(tp, &id);
		if (has < 0)
			continue;
		int dir = CALL_REAL(openat, -1, AT_FDCWD, augur_st.tiers[t], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
		if (dir < 0)
			continue;
		struct stat sb;
		if (augur_owned_fd(dir, S_IFDIR, &sb) &&
		    augur_real.unlinkat(dir, tp + strlen(augur_st.tiers[t]) + 1, 0) == 0 && augur_st.seg) {
			__atomic_fetch_add(&augur_st.seg->counters.invalidated, 1, __ATOMIC_RELAXED);
			if (has)
				augur_ident_forget(id.dev, id.ino, augur_key(abs));
		}
		augur_real.close(dir);
	}
}

AUGUR_HIDDEN void augur_invalidate_path(int dirfd, const char *path)
{
	char abs[PATH_MAX];
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	if (augur_classify_ns(dirfd, path, abs) == AUGUR_PATH_FILE)
		augur_invalidate_abs(abs);
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
}

/* remove_tree removes name, below dirfd, and everything under it. */
static void remove_tree(int dirfd, const char *name)
{
	int fd = CALL_REAL(openat, -1, dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0) {
		CALL_REAL(unlinkat, -1, dirfd, name, 0);
		return;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		augur_real.close(fd);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (CALL_REAL(unlinkat, -1, fd, e->d_name, 0) != 0 && (errno == EISDIR || errno == EPERM))
			remove_tree(fd, e->d_name);
	}
	CALL_REAL(closedir, -1, d);
	CALL_REAL(unlinkat, -1, dirfd, name, AT_REMOVEDIR);
}

/*
 * move_aside takes tier t's copies under the directory rel (below the
 * tier) out of service: one rename into the tier's trash/, which the
 * leader empties (shim's trash, tiering.Tree.EmptyTrash), so a directory
 * of a million files costs its renamer one rename. Where the rename
 * fails, the copies are removed here, one by one.
 */
static void move_aside(int t, const char *rel, const char *abs)
{
	static uint64_t seq;
	int dir = CALL_REAL(openat, -1, AT_FDCWD, augur_st.tiers[t], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (dir < 0)
		return;
	struct stat sb;
	if (augur_owned_fd(dir, S_IFDIR, &sb)) {
		char name[96];
		snprintf(name, sizeof(name), AUGUR_TRASH_DIR "/%d.%llu.%llu", (int)augur_self_pid(),
			 (unsigned long long)__atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED),
			 (unsigned long long)augur_now_ns());
		int r = CALL_REAL(renameat, -1, dir, rel, dir, name);
		if (r != 0 && errno == ENOENT && (mkdirat(dir, AUGUR_TRASH_DIR, 0700) == 0 || errno == EEXIST))
			r = CALL_REAL(renameat, -1, dir, rel, dir, name);
		if (r != 0 && errno != ENOENT)
			remove_tree(dir, rel);
		/* What it held, for the leader, which forgets each file's
		 * identity as it removes it (tiering.TrashDirXattr). */
		char moved[PATH_MAX];
		if (r == 0 && snprintf(moved, sizeof(moved), "%s/%s", augur_st.tiers[t], name) < (int)sizeof(moved))
			lsetxattr(moved, AUGUR_TRASH_XATTR, abs, strlen(abs), 0);
	}
	augur_real.close(dir);
}

/* tree_rel writes the directory of tier copies of the files under abs:
 * <in>/<each component of abs with an '@'> (tiering.CopyPath), in is
 * "files" or "blocks". */
static int tree_rel(const char *in, const char *abs, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, "%s", in);
	for (const char *s = abs; *s;) {
		while (*s == '/')
			s++;
		size_t len = strcspn(s, "/");
		if (!len)
			break;
		if (n + len + 3 > cap)
			return -1;
		out[n++] = '/';
		memcpy(out + n, s, len);
		n += len;
		out[n++] = '@';
		s += len;
	}
	out[n] = 0;
	return n > strlen(in) ? 0 : -1; /* never files/ itself */
}

/*
 * augur_invalidate_tree takes every copy of a file under the directory
 * abs (inside a root, or above one) out of service, before the directory
 * is renamed or removed. It moves ns_gen first, so that a publication
 * under way takes its copy back, moves each tier's subtree aside, waits
 * for those publications, and tells the leader, which forgets the files
 * and empties the trash.
 */
AUGUR_HIDDEN void augur_invalidate_tree(const char *abs)
{
	struct augur_segment *seg = augur_st.seg;
	char rel[PATH_MAX], brel[PATH_MAX];
	if (tree_rel("files", abs, rel, sizeof(rel)) < 0 || tree_rel("blocks", abs, brel, sizeof(brel)) < 0)
		return;
	if (seg)
		__atomic_fetch_add(&seg->writes.ns_gen, 1, __ATOMIC_SEQ_CST);
	for (int t = 0; t < augur_st.ntiers; t++)
		if (augur_st.tiers[t][0]) {
			move_aside(t, rel, abs);
			move_aside(t, brel, abs);
		}
	augur_await_all_publishers();
	if (seg) {
		__atomic_fetch_add(&seg->counters.trees, 1, __ATOMIC_RELAXED);
		augur_emit(AUGUR_EV_INVALIDATE, -1, -1, 0, abs, AUGUR_EVF_TREE);
	}
}

/* dir_gone takes out of service the copies under the directory (dirfd,
 * path), by the name the caller gave (lexical: abs, of class cls) and by
 * the one the kernel gives it (through symlinks, from any descriptor). */
static void dir_gone(int dirfd, const char *path, const char *abs, int cls)
{
	if (cls != AUGUR_PATH_OTHER)
		augur_invalidate_tree(abs);
	int fd = CALL_REAL(openat, -1, dirfd, path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	char link[64], real[PATH_MAX], kabs[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, real, sizeof(real) - 1);
	augur_real.close(fd);
	if (n <= 0)
		return;
	real[n] = 0;
	if (augur_classify(AT_FDCWD, real, kabs) != AUGUR_PATH_OTHER && (cls == AUGUR_PATH_OTHER || strcmp(kabs, abs) != 0))
		augur_invalidate_tree(kabs);
}

AUGUR_HIDDEN void augur_dir_gone(int dirfd, const char *path)
{
	char abs[PATH_MAX];
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	dir_gone(dirfd, path, abs, augur_classify_ns(dirfd, path, abs));
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
}

/*
 * augur_name_gone is called before (dirfd, path) loses the file it names
 * (unlink, either side of a rename), or, with content, before that
 * file's bytes change (truncate, which follows a final symlink). The
 * path's own copies go (lexical), a directory's take their subtree along,
 * and a copy of the same file under another name is marked stale: the
 * file is asked for by device and inode, one fstatat.
 */
AUGUR_HIDDEN void augur_name_gone(int dirfd, const char *path, int content)
{
	char abs[PATH_MAX];
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	int cls = augur_classify_ns(dirfd, path, abs);
	uint64_t own = 0;
	if (cls == AUGUR_PATH_FILE) {
		augur_invalidate_abs(abs);
		own = augur_key(abs);
	}
	struct stat sb;
	if (CALL_REAL(fstatat, -1, dirfd, path, &sb, content ? 0 : AT_SYMLINK_NOFOLLOW) == 0) {
		if (S_ISREG(sb.st_mode))
			augur_ident_changed(sb.st_dev, sb.st_ino, own);
		else if (S_ISDIR(sb.st_mode) && !content)
			dir_gone(dirfd, path, abs, cls);
		else if (S_ISLNK(sb.st_mode) && cls == AUGUR_PATH_FILE)
			augur_invalidate_tree(abs); /* copies made through it, as a directory */
	}
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
}
