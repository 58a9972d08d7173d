// Brotli (RFC 7932) and Zstandard (RFC 8878) decoders for content codings, from the system's
// libbrotlidec.so.1 and libzstd.so.1, loaded with dlopen(3) on first use.
//
// Loaded, not linked: building Ferry needs neither library's headers, and a machine without
// one still runs Ferry, which then does not offer that coding (`Accept-Encoding` names only
// what it can decode). The prototypes below are the libraries' stable ABI, declared here
// rather than included.

#ifndef CFERRY_CODECS_H
#define CFERRY_CODECS_H

#include <stddef.h>
#include <stdint.h>

/// What one decoding step did.
typedef enum {
    /// All input was taken; more is needed (or the input is complete and so is the body).
    FERRY_CODEC_NEEDS_INPUT = 0,
    /// The output buffer is full; call again with more room (the input may not be used up).
    FERRY_CODEC_NEEDS_OUTPUT = 1,
    /// The coded stream ended; any input after it is not part of it.
    FERRY_CODEC_FINISHED = 2,
    /// The input is not a valid stream of the coding (or the decoder ran out of memory).
    FERRY_CODEC_ERROR = 3,
} FerryCodecResult;

/// Whether libbrotlidec.so.1 could be loaded (loads it on the first call): 1 or 0.
int ferry_brotli_available(void);
/// A new decoder, or NULL when the library is missing or memory is short.
void *ferry_brotli_create(void);
/// Decodes from `input[*input_used ..< input_size]` into `output[*output_used ..< output_size]`,
/// advancing both counts.
FerryCodecResult ferry_brotli_decode(void *decoder, const uint8_t *input, size_t input_size, size_t *input_used,
                                     uint8_t *output, size_t output_size, size_t *output_used);
void ferry_brotli_destroy(void *decoder);

/// Whether libzstd.so.1 could be loaded (loads it on the first call): 1 or 0.
int ferry_zstd_available(void);
/// A new decoder refusing frames whose window exceeds 2^window_log_max bytes (its memory), or
/// NULL when the library is missing or memory is short.
void *ferry_zstd_create(int window_log_max);
/// As ferry_brotli_decode; FINISHED when a frame ended with all its output given (a stream may
/// hold several frames: call again with the rest of the input).
FerryCodecResult ferry_zstd_decode(void *decoder, const uint8_t *input, size_t input_size, size_t *input_used,
                                   uint8_t *output, size_t output_size, size_t *output_used);
void ferry_zstd_destroy(void *decoder);

#endif
