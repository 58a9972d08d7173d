// trace-code-entries: which code of a program runs, exactly, for scripts/make-order-file.
//
// Loaded with LD_PRELOAD into a program (the one named by TRACE_PROGRAM, a part of its
// path), it takes away the right to run the program's own code before the program starts,
// and gives it back one page at a time: each time the program enters a page that is not
// among the last TRACE_PAGES pages it ran (4 by default), the kernel stops it (SIGSEGV), the
// handler writes down the address it was entering (a function's first instruction when a
// call or a jump crossed pages) and lets it run that page, taking the right away from the
// oldest page again. At exit the addresses, each once, in the order first entered, are
// written as hex offsets from the program's load address to TRACE_DIR/entries.PID.
//
// Why not page faults: the kernel maps 64 KiB around each page of a file it faults in, so a
// fault shows only the first function of each 64 KiB, and nothing of what runs in it later.
// Here a function is seen whenever it is entered from another page; one called from its own
// page is seen once the order has put it elsewhere, which is why make-order-file measures
// several times, each with the order the last one wrote.
//
// The program runs slowly (a signal at every crossing of pages): trace small jobs.
// The program's own SIGSEGV and SIGBUS handlers are not installed while it is traced.

#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { pageSize = 4096, maxPages = 64, slots = 1 << 22 };

extern int __sigaction(int, const struct sigaction *, struct sigaction *);

static uintptr_t codeStart, codeEnd, loadAddress;
static uintptr_t openPages[maxPages];
static unsigned openCount = 4, nextOpen;
static volatile int lock;
static uintptr_t *seen;    // a hash set of the addresses recorded (open addressing)
static uintptr_t *entries; // the same addresses, in the order first entered
static unsigned long entryCount;

static void record(uintptr_t address) {
    for (uintptr_t slot = (address * 0x9E3779B97F4A7C15ull) >> 42;; slot++) {
        slot &= slots - 1;
        if (seen[slot] == address) return;
        if (seen[slot] == 0) {
            seen[slot] = address;
            if (entryCount < slots) entries[entryCount++] = address;
            return;
        }
    }
}

static void entered(int signal, siginfo_t *info, void *context) {
    (void)context;
    uintptr_t address = (uintptr_t)info->si_addr;
    if (address < codeStart || address >= codeEnd) {
        // Not the program's code: a real fault. Let it happen again, unhandled.
        struct sigaction plain = {.sa_handler = SIG_DFL};
        __sigaction(signal, &plain, NULL);
        return;
    }
    while (__sync_lock_test_and_set(&lock, 1)) {
    }
    record(address);
    uintptr_t page = address & ~(uintptr_t)(pageSize - 1);
    mprotect((void *)page, pageSize, PROT_READ | PROT_EXEC);
    uintptr_t oldest = openPages[nextOpen];
    openPages[nextOpen] = page;
    nextOpen = (nextOpen + 1) % openCount;
    int stillOpen = 0;
    for (unsigned i = 0; i < openCount; i++) stillOpen |= openPages[i] == oldest;
    if (oldest && !stillOpen) mprotect((void *)oldest, pageSize, PROT_NONE);
    __sync_lock_release(&lock);
}

// The program (the Swift runtime's backtracer, say) must not take SIGSEGV over.
int sigaction(int signal, const struct sigaction *action, struct sigaction *old) {
    if (codeStart && action && (signal == SIGSEGV || signal == SIGBUS)) {
        if (old) memset(old, 0, sizeof *old);
        return 0;
    }
    return __sigaction(signal, action, old);
}

__attribute__((constructor)) static void start(void) {
    char program[4096];
    ssize_t length = readlink("/proc/self/exe", program, sizeof program - 1);
    const char *wanted = getenv("TRACE_PROGRAM");
    if (length <= 0 || !wanted) return;
    program[length] = 0;
    if (!strstr(program, wanted)) return;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return;
    char line[8192];
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end, offset;
        char permissions[8], path[4096] = "";
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095s", &start, &end, permissions, &offset, path) < 4) continue;
        if (strcmp(path, program) != 0) continue;
        if (offset == 0 && !loadAddress) loadAddress = start;
        if (permissions[2] == 'x') codeStart = start, codeEnd = end;
    }
    fclose(maps);
    if (!codeStart) return;
    const char *pages = getenv("TRACE_PAGES");
    if (pages && atoi(pages) >= 1 && atoi(pages) <= maxPages) openCount = (unsigned)atoi(pages);
    seen = mmap(NULL, slots * sizeof *seen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    entries = mmap(NULL, slots * sizeof *entries, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (seen == MAP_FAILED || entries == MAP_FAILED) {
        codeStart = 0;
        return;
    }
    struct sigaction handler = {.sa_sigaction = entered, .sa_flags = SA_SIGINFO | SA_NODEFER};
    __sigaction(SIGSEGV, &handler, NULL);
    mprotect((void *)codeStart, codeEnd - codeStart, PROT_NONE);
}

__attribute__((destructor)) static void finish(void) {
    if (!codeStart) return;
    mprotect((void *)codeStart, codeEnd - codeStart, PROT_READ | PROT_EXEC);
    const char *directory = getenv("TRACE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/entries.%d", directory ? directory : ".", (int)getpid());
    FILE *file = fopen(path, "w");
    if (!file) return;
    for (unsigned long i = 0; i < entryCount; i++) fprintf(file, "%lx\n", (unsigned long)(entries[i] - loadAddress));
    fclose(file);
}
