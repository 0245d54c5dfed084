/* Whether a build's GPU code runs on a GPU: the rule of CUDA's fat binaries, for the
 * CUDA plugin's check before it hands llama.cpp a GPU it would abort on.  Plain C, no
 * llama.cpp: see lc_gpu_code.h. */
#include "lc_gpu_code.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "sm_86" -> 8, 6, arch 0; "sm_90a" -> 9, 0, arch 1; "compute_90" -> ptx; "sm_120" -> 12, 0. */
static bool parse_target(const char *t, size_t n, int *major, int *minor, bool *ptx, bool *arch)
{
    const char *digits;
    size_t len;
    *arch = false;
    if (n > 3 && strncmp(t, "sm_", 3) == 0) {
        digits = t + 3, len = n - 3, *ptx = false;
        if (len && digits[len - 1] == 'a')
            *arch = true, len--;
    } else if (n > 8 && strncmp(t, "compute_", 8) == 0) {
        digits = t + 8, len = n - 8, *ptx = true;
    } else {
        return false;
    }
    if (len < 2 || len > 3)
        return false;
    int value = 0;
    for (size_t i = 0; i < len; i++) {
        if (digits[i] < '0' || digits[i] > '9')
            return false;
        value = value * 10 + (digits[i] - '0');
    }
    *major = value / 10, *minor = value % 10;
    return true;
}

bool lc_gpu_code_runs_on(const char *targets, int ptx_driver, int cc_major, int cc_minor,
                         int driver)
{
    if (driver < ptx_driver / 1000 * 1000)
        return false; /* the build's CUDA runtime (e.g. libcudart.so.13) needs that major */
    for (const char *p = targets; p && *p;) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        int major, minor;
        bool ptx, arch;
        if (n && parse_target(p, n, &major, &minor, &ptx, &arch)) {
            if (ptx) {
                if (major * 10 + minor <= cc_major * 10 + cc_minor && driver >= ptx_driver)
                    return true;
            } else if (arch ? major == cc_major && minor == cc_minor
                            : major == cc_major && minor <= cc_minor) {
                return true;
            }
        }
        p += n;
    }
    return false;
}

void lc_gpu_code_why_not(const char *targets, int ptx_driver, int ordinal, int cc_major,
                         int cc_minor, int driver, char *out, size_t size)
{
    snprintf(out, size,
             "llama.cpp's CUDA library here has GPU code for %s, its PTX compiled by a driver for "
             "CUDA %d.%d or newer; GPU %d is compute capability %d.%d under a driver for CUDA "
             "%d.%d, so it cannot run it: update the NVIDIA driver, or build llama.cpp for this "
             "GPU from source (LLMR_LLAMA_CPP=source make)",
             targets, ptx_driver / 1000, ptx_driver % 1000 / 10, ordinal, cc_major, cc_minor,
             driver / 1000, driver % 1000 / 10);
}
