/*
 * invalidate.c — dropping a dataset file's copies when the file changes:
 * a write open, truncate, unlink or rename of it by any process of the
 * job removes every tier copy before the call goes on, so that no process
 * is served the old bytes.
 */
#include "internal.h"

#include <string.h>

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
	char tp[PATH_MAX];
	augur_bump_gen(abs);
	for (int t = 0; t < augur_st.ntiers; t++) {
		if (augur_tier_path(t, abs, tp, sizeof(tp)) < 0 || !REAL(unlinkat))
			continue;
		int dir = CALL_REAL(openat, -1, AT_FDCWD, augur_st.tiers[t], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
		if (dir < 0)
			continue;
		struct stat sb;
		if (augur_owned_fd(dir, S_IFDIR, &sb) &&
		    augur_real.unlinkat(dir, tp + strlen(augur_st.tiers[t]) + 1, 0) == 0 && augur_st.seg)
			__atomic_fetch_add(&augur_st.seg->counters.invalidated, 1, __ATOMIC_RELAXED);
		augur_real.close(dir);
	}
	augur_await_publishers(abs);
	if (augur_st.seg)
		augur_emit(AUGUR_EV_INVALIDATE, -1, -1, 0, abs, 0);
}

AUGUR_HIDDEN void augur_invalidate_path(int dirfd, const char *path)
{
	char abs[PATH_MAX];
	AUGUR_ERRNO_SAVE;
	augur_guard++;
	if (augur_classify(dirfd, path, abs) == AUGUR_PATH_FILE)
		augur_invalidate_abs(abs);
	augur_guard--;
	AUGUR_ERRNO_RESTORE;
}

