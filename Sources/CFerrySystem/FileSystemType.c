#include "CFerrySystem.h"

#if defined(__linux__)
#include <sys/vfs.h>

long ferry_file_system_type(int descriptor) {
    struct statfs info;
    return fstatfs(descriptor, &info) == 0 ? (long)info.f_type : -1;
}
#else
long ferry_file_system_type(int descriptor) {
    (void)descriptor;
    return -1;
}
#endif
