/*
 * paths.c — path classification: is (dirfd, path) a file inside a dataset
 * root, a directory at or above one, or neither (then the call goes
 * straight to libc)? And where a dataset file's copy lies in a tier. Asked
 * on every open of every process under the shim, so the common case, an
 * absolute path elsewhere, is answered after a look at its first
 * component.
 */
#include "internal.h"
#include "pathscan.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

/*
 * normalize joins base and path and removes ".", empty and ".."
 * components lexically. It reports through *dotdot whether a ".." was
 * met, because lexical ".." is only right when no symlink precedes it.
 * Returns the length, or -1 if the result does not fit.
 */
static int normalize(const char *base, const char *path, char *out, int *dotdot)
{
	size_t n = 0;
	const char *parts[2] = {base, path};
	*dotdot = 0;
	out[n++] = '/';
	for (int p = 0; p < 2; p++) {
		const char *s = parts[p];
		if (!s)
			continue;
		while (*s) {
			while (*s == '/')
				s++;
			const char *e = s;
			while (*e && *e != '/')
				e++;
			size_t len = (size_t)(e - s);
			if (len == 0 || (len == 1 && s[0] == '.')) {
				/* skip */
			} else if (len == 2 && s[0] == '.' && s[1] == '.') {
				*dotdot = 1;
				while (n > 1 && out[n - 1] != '/')
					n--;
				if (n > 1)
					n--; /* drop the slash too */
			} else {
				if (n > 1) {
					if (n + 1 >= PATH_MAX)
						return -1;
					out[n++] = '/';
				}
				if (n + len >= PATH_MAX)
					return -1;
				memcpy(out + n, s, len);
				n += len;
			}
			s = e;
		}
	}
	out[n] = 0;
	return (int)n;
}

/* same_bytes says whether the n bytes at a and b are equal, eight at a
 * time; both hold at least n bytes. */
static inline int same_bytes(const char *a, const char *b, size_t n)
{
	if (n < 8) {
		for (size_t i = 0; i < n; i++)
			if (a[i] != b[i])
				return 0;
		return 1;
	}
	for (size_t i = 0; i + 8 < n; i += 8)
		if (augur_word(a + i) != augur_word(b + i))
			return 0;
	return augur_word(a + n - 8) == augur_word(b + n - 8);
}

/* classify_abs tells whether abs is inside a dataset root (AUGUR_PATH_FILE;
 * *root is that root's index), is a root or one of its ancestors
 * (AUGUR_PATH_ABOVE), or neither. */
static inline __attribute__((always_inline)) int classify_abs(const char *abs, size_t len, int *root)
{
	int cls = AUGUR_PATH_OTHER;
	for (int i = 0; i < augur_st.nroots; i++) {
		size_t rl = augur_st.rootlen[i];
		const char *r = augur_st.roots[i];
		if (len > rl && abs[rl] == '/' && same_bytes(abs, r, rl)) {
			*root = i;
			return AUGUR_PATH_FILE;
		}
		if (rl >= len && (r[len] == 0 || r[len] == '/' || len == 1) && same_bytes(abs, r, len))
			cls = AUGUR_PATH_ABOVE;
	}
	return cls;
}

/* base_of returns the directory a relative path is resolved against, or
 * NULL when that is a directory fd the shim does not track (then the path
 * cannot be a dataset path the shim knows about, and it passes through). */
static const char *base_of(int dirfd, char *cwd)
{
	if (dirfd == AT_FDCWD) {
		if (syscall(SYS_getcwd, cwd, PATH_MAX) < 0)
			return NULL;
		return cwd;
	}
	return augur_fd_dir_path(dirfd);
}

/*
 * names_dir says whether path can only name a directory: it ends in a
 * slash, or its last component is "." or "..". The kernel never opens a
 * regular file by such a name ("a.bin/" is ENOTDIR), but normalising
 * drops that information, so augur_classify makes such a path a directory the
 * shim tracks, never a file it serves from a copy.
 */
static int names_dir(const char *path)
{
	size_t n = strlen(path);
	if (n > 0 && path[n - 1] == '/')
		return 1;
	const char *last = strrchr(path, '/');
	last = last ? last + 1 : path;
	return strcmp(last, ".") == 0 || strcmp(last, "..") == 0;
}

static int resolve_slow(int dirfd, const char *path, char *abs, struct augur_name *name);

/*
 * augur_classify_normal classifies path if it is absolute and already
 * normal (clean_length), as most paths a program opens are, and names it
 * in *name; it answers -1 for any other: only augur_classify_n can tell
 * ("/usr/../data/x" is under a root "/data"). A normal absolute path
 * names a directory by its form (see names_dir) only if it is "/".
 */
AUGUR_HIDDEN int augur_classify_normal(const char *path, struct augur_name *name)
{
	int n = path && path[0] == '/' ? clean_length(path) : -1;
	if (n < 0)
		return -1;
	*name = (struct augur_name){.abs = path, .len = (size_t)n, .root = -1};
	int cls = classify_abs(path, (size_t)n, &name->root);
	return cls == AUGUR_PATH_FILE && n == 1 ? AUGUR_PATH_ABOVE : cls; /* "/", under a root "/" */
}

/*
 * augur_classify_n turns (dirfd, path) into an absolute, normalised path,
 * named in *name, and classifies it: name->abs is path itself where it is
 * one already, else buf (PATH_MAX), which holds it. A path with ".." under
 * a root is resolved again with realpath(3) of its parent directory, so
 * that a symlink before the ".." is followed as the kernel would.
 */
AUGUR_HIDDEN int augur_classify_n(int dirfd, const char *path, char *buf, struct augur_name *name)
{
	int cls = augur_classify_normal(path, name);
	if (cls >= 0)
		return cls;
	*name = (struct augur_name){.abs = buf, .root = -1};
	if (!path || !*path)
		return AUGUR_PATH_OTHER;
	cls = resolve_slow(dirfd, path, buf, name);
	return cls == AUGUR_PATH_FILE && names_dir(path) ? AUGUR_PATH_ABOVE : cls;
}

/* resolve_slow handles relative paths and paths that need normalising,
 * apart from augur_classify_n so that the common case does not set up its
 * buffers. */
static __attribute__((noinline)) int resolve_slow(int dirfd, const char *path, char *abs, struct augur_name *name)
{
	char cwd[PATH_MAX];
	const char *base = NULL;
	int dotdot;
	if (path[0] != '/') {
		base = base_of(dirfd, cwd);
		if (!base)
			return AUGUR_PATH_OTHER;
	}
	int n = normalize(base, path, abs, &dotdot);
	if (n < 0)
		return AUGUR_PATH_OTHER;
	name->len = (size_t)n;
	int cls = classify_abs(abs, (size_t)n, &name->root);
	if (cls == AUGUR_PATH_OTHER || !dotdot)
		return cls;

	char joined[PATH_MAX], real[PATH_MAX];
	int w = snprintf(joined, sizeof(joined), "%s/%s", base ? base : "", path);
	if (w < 0 || w >= (int)sizeof(joined))
		return AUGUR_PATH_OTHER;
	char *slash = strrchr(joined, '/');
	const char *leaf = slash + 1;
	*slash = 0;
	if (!realpath(joined[0] ? joined : "/", real))
		return AUGUR_PATH_OTHER;
	if ((n = normalize(real, leaf, abs, &dotdot)) < 0)
		return AUGUR_PATH_OTHER;
	name->len = (size_t)n;
	name->root = -1;
	return classify_abs(abs, (size_t)n, &name->root);
}

AUGUR_HIDDEN int augur_classify(int dirfd, const char *path, char *abs)
{
	struct augur_name name;
	int cls = augur_classify_n(dirfd, path, abs, &name);
	if (cls != AUGUR_PATH_OTHER && name.abs != abs)
		memcpy(abs, name.abs, name.len + 1);
	return cls;
}

AUGUR_HIDDEN int augur_classify_ns(int dirfd, const char *path, char *abs)
{
	if (!path || path[0] == '/' || dirfd == AT_FDCWD || augur_fd_dir_path(dirfd))
		return augur_classify(dirfd, path, abs);
	char link[64], base[PATH_MAX], joined[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	ssize_t n = readlink(link, base, sizeof(base) - 1);
	if (n <= 0 || base[0] != '/')
		return AUGUR_PATH_OTHER;
	base[n] = 0;
	int w = snprintf(joined, sizeof(joined), "%s/%s", base, path);
	if (w < 0 || w >= (int)sizeof(joined))
		return AUGUR_PATH_OTHER;
	return augur_classify(AT_FDCWD, joined, abs);
}

/*
 * augur_tier_path maps the absolute source path abs, of len bytes, to its
 * copy in tier t: <tier>/files/<dir>@/<dir>@/<name>. The '@' on every
 * directory component keeps a directory of the source from ever matching
 * a copied file, so a read-only open of a dataset directory never lands
 * on a tier directory. Files whose name ends in '@' are never copied (see
 * tiering.CopyPath).
 */
AUGUR_HIDDEN int augur_tier_path(int t, const struct augur_name *name, char *out, size_t cap)
{
	/* Under a root, all of the path up to the root's end is made
	 * already: what follows it is marked the same whatever precedes it. */
	int r = name->root;
	size_t pl = r >= 0 ? augur_st.prefixlen[t][r] : 0, rl = r >= 0 ? augur_st.rootlen[r] : 0;
	if (pl && pl + 1 < cap) {
		copy_bytes(out, augur_st.prefix[t][r], pl);
		return marked_copy(out, pl, cap, name->abs + rl, name->len - rl);
	}
	size_t n = augur_st.tierlen[t];
	if (n == 0 || n + 6 >= cap) /* a tier not in use, or too long a path */
		return -1;
	memcpy(out, augur_st.tiers[t], n);
	memcpy(out + n, "/files", 6);
	return marked_copy(out, n + 6, cap, name->abs, name->len);
}

/* augur_make_prefixes makes, for each tier in use and root (but "/"),
 * the part of the root's files' copies' paths up to the root's end:
 * <tier>/files<root with "@" after each directory and after itself>.
 * Without the memory for one, those copies' paths are made whole. */
AUGUR_HIDDEN void augur_make_prefixes(void)
{
	for (int t = 0; t < augur_st.ntiers; t++)
		for (int i = 0; i < augur_st.nroots; i++) {
			size_t n = augur_st.tierlen[t], rl = augur_st.rootlen[i];
			const char *r = augur_st.roots[i];
			char *p = n && rl ? malloc(n + 6 + 2 * rl + 2) : NULL;
			if (!p)
				continue;
			memcpy(p, augur_st.tiers[t], n);
			memcpy(p + n, "/files", 6);
			n += 6;
			for (size_t k = 0; k < rl; k++) {
				if (k > 0 && r[k] == '/')
					p[n++] = '@';
				p[n++] = r[k];
			}
			p[n++] = '@';
			p[n] = 0;
			augur_st.prefix[t][i] = p;
			augur_st.prefixlen[t][i] = n;
		}
}

/* augur_tier_path_in is augur_tier_path under the tier's directory dir:
 * "files" for whole copies, "blocks" for large files' blocks. */
AUGUR_HIDDEN int augur_tier_path_in(int t, const char *dir, const char *abs, char *out, size_t cap)
{
	size_t n = augur_st.tierlen[t], d = strlen(dir);
	if (n == 0 || n + d + 1 >= cap)
		return -1;
	memcpy(out, augur_st.tiers[t], n);
	out[n++] = '/';
	memcpy(out + n, dir, d);
	return marked_copy(out, n + d, cap, abs, strlen(abs));
}
