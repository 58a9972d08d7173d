// See include/CFerryCodecs.h.

#include "CFerryCodecs.h"

#include <dlfcn.h>
#include <pthread.h>

// libbrotlidec's ABI (brotli/decode.h): BrotliDecoderResult is an int-sized enum,
// ERROR 0, SUCCESS 1, NEEDS_MORE_INPUT 2, NEEDS_MORE_OUTPUT 3.
typedef struct {
    void *(*create)(void *, void *, void *);
    int (*decompress)(void *, size_t *, const uint8_t **, size_t *, uint8_t **, size_t *);
    void (*destroy)(void *);
} Brotli;

// libzstd's ABI (zstd.h): ZSTD_inBuffer / ZSTD_outBuffer as below, errors as size_t codes
// that ZSTD_isError recognizes, ZSTD_d_windowLogMax = 100.
typedef struct {
    const void *src;
    size_t size;
    size_t pos;
} ZstdIn;
typedef struct {
    void *dst;
    size_t size;
    size_t pos;
} ZstdOut;
typedef struct {
    void *(*create)(void);
    size_t (*free)(void *);
    size_t (*set_parameter)(void *, int, int);
    size_t (*decompress)(void *, ZstdOut *, ZstdIn *);
    unsigned (*is_error)(size_t);
} Zstd;

static Brotli brotli;
static int brotliLoaded = 0;
static pthread_once_t brotliOnce = PTHREAD_ONCE_INIT;
static Zstd zstd;
static int zstdLoaded = 0;
static pthread_once_t zstdOnce = PTHREAD_ONCE_INIT;

static void loadBrotli(void) {
    void *library = dlopen("libbrotlidec.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return;
    brotli.create = (void *(*)(void *, void *, void *))dlsym(library, "BrotliDecoderCreateInstance");
    brotli.decompress = (int (*)(void *, size_t *, const uint8_t **, size_t *, uint8_t **, size_t *))dlsym(
        library, "BrotliDecoderDecompressStream");
    brotli.destroy = (void (*)(void *))dlsym(library, "BrotliDecoderDestroyInstance");
    brotliLoaded = brotli.create != NULL && brotli.decompress != NULL && brotli.destroy != NULL;
}

static void loadZstd(void) {
    void *library = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) return;
    zstd.create = (void *(*)(void))dlsym(library, "ZSTD_createDCtx");
    zstd.free = (size_t(*)(void *))dlsym(library, "ZSTD_freeDCtx");
    zstd.set_parameter = (size_t(*)(void *, int, int))dlsym(library, "ZSTD_DCtx_setParameter");
    zstd.decompress = (size_t(*)(void *, ZstdOut *, ZstdIn *))dlsym(library, "ZSTD_decompressStream");
    zstd.is_error = (unsigned (*)(size_t))dlsym(library, "ZSTD_isError");
    zstdLoaded = zstd.create != NULL && zstd.free != NULL && zstd.set_parameter != NULL && zstd.decompress != NULL &&
                 zstd.is_error != NULL;
}

int ferry_brotli_available(void) {
    pthread_once(&brotliOnce, loadBrotli);
    return brotliLoaded;
}

void *ferry_brotli_create(void) {
    if (!ferry_brotli_available()) return NULL;
    return brotli.create(NULL, NULL, NULL);
}

FerryCodecResult ferry_brotli_decode(void *decoder, const uint8_t *input, size_t input_size, size_t *input_used,
                                     uint8_t *output, size_t output_size, size_t *output_used) {
    size_t availableIn = input_size - *input_used;
    const uint8_t *nextIn = input + *input_used;
    size_t availableOut = output_size - *output_used;
    uint8_t *nextOut = output + *output_used;
    int result = brotli.decompress(decoder, &availableIn, &nextIn, &availableOut, &nextOut, NULL);
    *input_used = input_size - availableIn;
    *output_used = output_size - availableOut;
    switch (result) {
    case 1: return FERRY_CODEC_FINISHED;
    case 2: return FERRY_CODEC_NEEDS_INPUT;
    case 3: return FERRY_CODEC_NEEDS_OUTPUT;
    default: return FERRY_CODEC_ERROR;
    }
}

void ferry_brotli_destroy(void *decoder) {
    if (decoder != NULL) brotli.destroy(decoder);
}

int ferry_zstd_available(void) {
    pthread_once(&zstdOnce, loadZstd);
    return zstdLoaded;
}

void *ferry_zstd_create(int window_log_max) {
    if (!ferry_zstd_available()) return NULL;
    void *decoder = zstd.create();
    if (decoder == NULL) return NULL;
    if (zstd.is_error(zstd.set_parameter(decoder, 100, window_log_max))) {
        zstd.free(decoder);
        return NULL;
    }
    return decoder;
}

FerryCodecResult ferry_zstd_decode(void *decoder, const uint8_t *input, size_t input_size, size_t *input_used,
                                   uint8_t *output, size_t output_size, size_t *output_used) {
    ZstdIn in = {input, input_size, *input_used};
    ZstdOut out = {output, output_size, *output_used};
    size_t result = zstd.decompress(decoder, &out, &in);
    *input_used = in.pos;
    *output_used = out.pos;
    if (zstd.is_error(result)) return FERRY_CODEC_ERROR;
    // 0: a frame is complete and all of it flushed.
    if (result == 0) return FERRY_CODEC_FINISHED;
    if (out.pos == out.size) return FERRY_CODEC_NEEDS_OUTPUT;
    return FERRY_CODEC_NEEDS_INPUT;
}

void ferry_zstd_destroy(void *decoder) {
    if (decoder != NULL) zstd.free(decoder);
}
