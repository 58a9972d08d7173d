// libcurl, loaded on first use instead of at program start.
//
// Foundation's networking module on Linux (URLRequest, URLSession) is built on libcurl, so a
// program that imports it names libcurl.so.4 as a dependency and the dynamic loader maps and
// relocates libcurl and the thirty-odd libraries it needs (OpenSSL, GSSAPI, LDAP, nghttp2, ...)
// before `main`. Ferry's programs use URLRequest as a value and never start a URLSession, so
// that work is wasted: about 10 MiB of resident memory for `ferry get`.
//
// This target defines the libcurl functions Foundation's networking code calls, each of which
// loads libcurl.so.4 with dlopen(3) on the first call and forwards to it. Linked into a program
// whose link line takes libcurl "as needed" (scripts/build-release does that), the program no
// longer depends on libcurl: it starts without it, and loads it only if it ever runs a URLSession.
// In a program that does load libcurl at start (a debug build), the calls still reach it.

#ifndef FERRY_LAZY_LIBCURL_H
#define FERRY_LAZY_LIBCURL_H

/// Whether libcurl has been loaded through these functions: 1 once a call has loaded it, else 0.
int ferry_lazy_libcurl_is_loaded(void);

#endif
