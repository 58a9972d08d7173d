// The libcurl functions that Foundation's networking code (its CFURLSessionInterface) calls,
// each loading libcurl.so.4 on first use and forwarding to it. See include/FerryLazyLibcurl.h
// for why.
//
// The parameter types are ABI-equivalent to curl.h's (CURL *, CURLM *, CURLU * and struct
// curl_slist * are pointers; CURLcode, CURLMcode, CURLUcode, CURLoption, CURLMoption, CURLINFO,
// CURLUPart and CURLversion are C enums, passed as int; curl_socket_t is int on POSIX). curl.h
// is not included: it is not installed everywhere Ferry builds, and its type-checking macros
// replace curl_easy_setopt and curl_easy_getinfo with macros of the same names.
//
// The three variadic functions take exactly one argument after the option: a long, a
// curl_off_t, or a pointer (object or function), all of the integer class on the System V
// x86-64 and AArch64 calling conventions, so it is read as a pointer-sized value and passed on
// the same way. libcurl reads it back with the type the option names.
//
// Elsewhere (macOS, 32-bit Linux) nothing here is defined and programs link libcurl as usual.

#include "FerryLazyLibcurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))

typedef struct {
    int (*global_init)(long);
    void *(*easy_init)(void);
    void (*easy_cleanup)(void *);
    int (*easy_setopt)(void *, int, ...);
    int (*easy_getinfo)(void *, int, ...);
    int (*easy_pause)(void *, int);
    const char *(*easy_strerror)(int);
    void (*free_memory)(void *);
    void *(*multi_init)(void);
    int (*multi_add_handle)(void *, void *);
    int (*multi_assign)(void *, int, void *);
    int (*multi_cleanup)(void *);
    void *(*multi_info_read)(void *, int *);
    int (*multi_remove_handle)(void *, void *);
    int (*multi_setopt)(void *, int, ...);
    int (*multi_socket_action)(void *, int, int, int *);
    void *(*slist_append)(void *, const char *);
    void (*slist_free_all)(void *);
    void *(*url)(void);
    int (*url_get)(const void *, int, char **, unsigned int);
    int (*url_set)(void *, int, const char *, unsigned int);
    char *(*version)(void);
    void *(*version_info)(int);
} LibcurlFunctions;

static LibcurlFunctions libcurl;
static pthread_once_t libcurlOnce = PTHREAD_ONCE_INIT;
static int libcurlLoaded = 0;

// Called only from code that has already decided to use libcurl (a URLSession): without it,
// the program could not have started had it been linked the usual way, so this ends it the same
// way, saying why.
static void unavailable(const char *what, const char *detail) {
    fprintf(stderr, "libcurl is needed by Foundation's URLSession but %s: %s\n", what, detail ? detail : "");
    abort();
}

static void *resolve(void *library, const char *name) {
    void *function = dlsym(library, name);
    if (function == NULL) unavailable("lacks a function", name);
    return function;
}

static void load(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) unavailable("could not be loaded", dlerror());
    *(void **)&libcurl.global_init = resolve(library, "curl_global_init");
    *(void **)&libcurl.easy_init = resolve(library, "curl_easy_init");
    *(void **)&libcurl.easy_cleanup = resolve(library, "curl_easy_cleanup");
    *(void **)&libcurl.easy_setopt = resolve(library, "curl_easy_setopt");
    *(void **)&libcurl.easy_getinfo = resolve(library, "curl_easy_getinfo");
    *(void **)&libcurl.easy_pause = resolve(library, "curl_easy_pause");
    *(void **)&libcurl.easy_strerror = resolve(library, "curl_easy_strerror");
    *(void **)&libcurl.free_memory = resolve(library, "curl_free");
    *(void **)&libcurl.multi_init = resolve(library, "curl_multi_init");
    *(void **)&libcurl.multi_add_handle = resolve(library, "curl_multi_add_handle");
    *(void **)&libcurl.multi_assign = resolve(library, "curl_multi_assign");
    *(void **)&libcurl.multi_cleanup = resolve(library, "curl_multi_cleanup");
    *(void **)&libcurl.multi_info_read = resolve(library, "curl_multi_info_read");
    *(void **)&libcurl.multi_remove_handle = resolve(library, "curl_multi_remove_handle");
    *(void **)&libcurl.multi_setopt = resolve(library, "curl_multi_setopt");
    *(void **)&libcurl.multi_socket_action = resolve(library, "curl_multi_socket_action");
    *(void **)&libcurl.slist_append = resolve(library, "curl_slist_append");
    *(void **)&libcurl.slist_free_all = resolve(library, "curl_slist_free_all");
    *(void **)&libcurl.url = resolve(library, "curl_url");
    *(void **)&libcurl.url_get = resolve(library, "curl_url_get");
    *(void **)&libcurl.url_set = resolve(library, "curl_url_set");
    *(void **)&libcurl.version = resolve(library, "curl_version");
    *(void **)&libcurl.version_info = resolve(library, "curl_version_info");
    __atomic_store_n(&libcurlLoaded, 1, __ATOMIC_RELEASE);
}

static const LibcurlFunctions *functions(void) {
    pthread_once(&libcurlOnce, load);
    return &libcurl;
}

int ferry_lazy_libcurl_is_loaded(void) { return __atomic_load_n(&libcurlLoaded, __ATOMIC_ACQUIRE); }

int curl_global_init(long flags) { return functions()->global_init(flags); }
void *curl_easy_init(void) { return functions()->easy_init(); }
void curl_easy_cleanup(void *handle) { functions()->easy_cleanup(handle); }
int curl_easy_pause(void *handle, int bitmask) { return functions()->easy_pause(handle, bitmask); }
const char *curl_easy_strerror(int code) { return functions()->easy_strerror(code); }
void curl_free(void *pointer) { functions()->free_memory(pointer); }
void *curl_multi_init(void) { return functions()->multi_init(); }
int curl_multi_add_handle(void *multi, void *easy) { return functions()->multi_add_handle(multi, easy); }
int curl_multi_assign(void *multi, int socket, void *pointer) {
    return functions()->multi_assign(multi, socket, pointer);
}
int curl_multi_cleanup(void *multi) { return functions()->multi_cleanup(multi); }
void *curl_multi_info_read(void *multi, int *remaining) { return functions()->multi_info_read(multi, remaining); }
int curl_multi_remove_handle(void *multi, void *easy) { return functions()->multi_remove_handle(multi, easy); }
int curl_multi_socket_action(void *multi, int socket, int events, int *running) {
    return functions()->multi_socket_action(multi, socket, events, running);
}
void *curl_slist_append(void *list, const char *string) { return functions()->slist_append(list, string); }
void curl_slist_free_all(void *list) { functions()->slist_free_all(list); }
void *curl_url(void) { return functions()->url(); }
int curl_url_get(const void *url, int part, char **value, unsigned int flags) {
    return functions()->url_get(url, part, value, flags);
}
int curl_url_set(void *url, int part, const char *value, unsigned int flags) {
    return functions()->url_set(url, part, value, flags);
}
char *curl_version(void) { return functions()->version(); }
void *curl_version_info(int age) { return functions()->version_info(age); }

// The variadic three: the one argument after the option, read and passed on as a pointer.
#define FORWARD_ONE_ARGUMENT(name, field)                                                      \
    int name(void *handle, int option, ...) {                                                  \
        va_list arguments;                                                                     \
        va_start(arguments, option);                                                           \
        void *value = va_arg(arguments, void *);                                               \
        va_end(arguments);                                                                     \
        return functions()->field(handle, option, value);                                      \
    }

FORWARD_ONE_ARGUMENT(curl_easy_setopt, easy_setopt)
FORWARD_ONE_ARGUMENT(curl_easy_getinfo, easy_getinfo)
FORWARD_ONE_ARGUMENT(curl_multi_setopt, multi_setopt)

#else

int ferry_lazy_libcurl_is_loaded(void) { return 0; }

#endif
