/**
 * Time limits in tests are hang guards, never measurements: a child process or a test that takes
 * longer than this has hung. They are far above what any test takes on an idle machine because the
 * suite must pass on a 2-core CI machine with both cores busy (scripts/test-under-load.sh), where a
 * cold `kiln bench` child (native builds included) took more than the old 60 s guards.
 */
export const HANG_GUARD_MS = 10 * 60_000;
