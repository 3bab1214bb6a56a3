/* Scripted randomness for Darknet's load_data_detection (tests/test_augment_darknet_opencv.py).
 *
 * Loaded with RTLD_GLOBAL before libdarknet.so, these definitions interpose Darknet's own (src/utils.c): its
 * calls to them go through the PLT. rand_int, rand_scale and rand_uniform_strong are defined too because
 * utils.c has random_gen / random_float inlined into them (they call libc's rand() directly); their bodies
 * are Darknet's. Every value comes from the script set by rand_script_set(); each call appends 'g'
 * (random_gen) or 'f' (random_float) to a log, so a test can check that the port asks in the same order. */
#include <stdio.h>
#include <stdlib.h>

#define DARKNET_RAND_MAX 2147483647
static unsigned int *script = NULL;
static int script_len = 0, script_pos = 0;
static char *calls = NULL;

void rand_script_set(const unsigned int *values, int n) {
    free(script);
    free(calls);
    script = (unsigned int *)malloc(sizeof(unsigned int) * (n ? n : 1));
    calls = (char *)calloc(n + 1, 1);
    for (int i = 0; i < n; ++i) script[i] = values[i];
    script_len = n;
    script_pos = 0;
}

int rand_script_used(void) { return script_pos; }
const char *rand_script_calls(void) { return calls ? calls : ""; }

static unsigned int next(char kind) {
    if (script_pos >= script_len) {
        fprintf(stderr, "rand_script: the script of %d values is exhausted\n", script_len);
        abort();
    }
    calls[script_pos] = kind;
    return script[script_pos++];
}

unsigned int random_gen(void) { return next('g'); }

float random_float(void) { return ((float)next('f') / (float)DARKNET_RAND_MAX); }

int rand_int(int min, int max) {
    if (max < min) { int s = min; min = max; max = s; }
    int r = (random_gen() % (max - min + 1)) + min;
    return r;
}

float rand_uniform_strong(float min, float max) {
    if (max < min) { float swap = min; min = max; max = swap; }
    return (random_float() * (max - min)) + min;
}

float rand_scale(float s) {
    float scale = rand_uniform_strong(1, s);
    if (random_gen() % 2) return scale;
    return 1. / scale;
}
