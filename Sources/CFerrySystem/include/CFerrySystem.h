// System calls Swift's Glibc module leaves out, for the Ferry target.
//
// The Glibc module map Swift ships includes <sys/statvfs.h> but not <sys/vfs.h>, so
// `fstatfs(2)`, the one call that names a file system's type, is not reachable from Swift.

#ifndef C_FERRY_SYSTEM_H
#define C_FERRY_SYSTEM_H

/// The type of the file system that `descriptor` lives on (`f_type` of `fstatfs(2)`, one of
/// the 32-bit magic numbers of <linux/magic.h>, never negative: `f_type` is signed, and 32
/// bits wide on some systems), or -1 when it cannot be read or on systems without `fstatfs`.
long long ferry_file_system_type(int descriptor);

#endif
