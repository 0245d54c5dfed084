/* Which GPUs a build of llama.cpp's CUDA backend runs on (engines/llama_cpp/lc_gpu_code.c):
 * machine code runs on its major's later minors (sm_XYa on XY alone), PTX on later GPUs
 * when the driver is at least the CUDA that wrote it.  The prebuilt library of the pinned
 * release (sm_86 sm_89 sm_120 sm_121, PTX 7.5/8.0/9.0 of CUDA 13.1) cannot run on Hopper
 * under a driver for CUDA 13.0: the driver refused it there ("the provided PTX was
 * compiled with an unsupported toolchain"), and ggml aborted the process. */
#include <string.h>

#include "check.h"
#include "lc_gpu_code.h"

static const char *prebuilt = "sm_86 sm_89 sm_120 sm_121 compute_75 compute_80 compute_90";

TEST(the_prebuilt_library_needs_a_cuda_13_1_driver_on_hopper)
{
    CHECK(!lc_gpu_code_runs_on(prebuilt, 13010, 9, 0, 13000));
    CHECK(lc_gpu_code_runs_on(prebuilt, 13010, 9, 0, 13010));
    CHECK(lc_gpu_code_runs_on(prebuilt, 13010, 9, 0, 13020));
    CHECK(!lc_gpu_code_runs_on(prebuilt, 13010, 8, 0, 13000)); /* A100 */
    CHECK(!lc_gpu_code_runs_on(prebuilt, 13010, 7, 0, 13020)); /* V100: no PTX that old */
    CHECK(!lc_gpu_code_runs_on(prebuilt, 13010, 10, 0, 13000)); /* B200 on 13.0 */
    CHECK(lc_gpu_code_runs_on(prebuilt, 13010, 10, 0, 13010));  /* PTX 9.0 on 10.0 */
}

TEST(machine_code_runs_on_its_major_and_later_minors)
{
    CHECK(lc_gpu_code_runs_on(prebuilt, 13010, 8, 6, 13000));
    CHECK(lc_gpu_code_runs_on(prebuilt, 13010, 8, 7, 13000));
    CHECK(lc_gpu_code_runs_on(prebuilt, 13010, 8, 9, 13000));
    CHECK(lc_gpu_code_runs_on(prebuilt, 13010, 12, 0, 13000));
    CHECK(lc_gpu_code_runs_on(prebuilt, 13010, 12, 1, 13000));
    CHECK(!lc_gpu_code_runs_on("sm_86", 0, 8, 0, 13000));
}

TEST(nothing_runs_under_a_driver_older_than_the_builds_cuda)
{
    /* libcudart.so.13 needs a driver for CUDA 13: machine code or not */
    CHECK(!lc_gpu_code_runs_on(prebuilt, 13010, 8, 6, 12090));
    CHECK(!lc_gpu_code_runs_on(prebuilt, 13010, 12, 0, 12080));
    CHECK(lc_gpu_code_runs_on("sm_90a", 12040, 9, 0, 12040)); /* a CUDA 12.4 build */
    CHECK(!lc_gpu_code_runs_on("sm_90a", 12040, 9, 0, 11080));
}

TEST(arch_specific_code_runs_on_that_gpu_alone)
{
    CHECK(lc_gpu_code_runs_on("sm_90a", 13000, 9, 0, 13000));
    CHECK(!lc_gpu_code_runs_on("sm_90a", 13000, 10, 0, 13000));
    CHECK(!lc_gpu_code_runs_on("sm_100a", 13000, 10, 3, 13000));
    CHECK(lc_gpu_code_runs_on("sm_100a", 13000, 10, 0, 13000));
}

TEST(nonsense_targets_run_nowhere)
{
    CHECK(!lc_gpu_code_runs_on("", 0, 9, 0, 13000));
    CHECK(!lc_gpu_code_runs_on(NULL, 0, 9, 0, 13000));
    CHECK(!lc_gpu_code_runs_on("cpu", 0, 9, 0, 13000));
    CHECK(!lc_gpu_code_runs_on("sm_ compute_ sm_9 sm_9x0 compute_1234", 0, 9, 0, 13000));
    CHECK(lc_gpu_code_runs_on("  sm_90  ", 0, 9, 0, 13000));
}

TEST(the_refusal_names_the_gpu_the_driver_and_the_way_out)
{
    char why[512];
    lc_gpu_code_why_not(prebuilt, 13010, 1, 9, 0, 13000, why, sizeof why);
    CHECK(strstr(why, "GPU 1 is compute capability 9.0 under a driver for CUDA 13.0") != NULL);
    CHECK(strstr(why, "CUDA 13.1 or newer") != NULL);
    CHECK(strstr(why, "LLMR_LLAMA_CPP=source") != NULL);
}

int main(void)
{
    RUN(the_prebuilt_library_needs_a_cuda_13_1_driver_on_hopper);
    RUN(machine_code_runs_on_its_major_and_later_minors);
    RUN(nothing_runs_under_a_driver_older_than_the_builds_cuda);
    RUN(arch_specific_code_runs_on_that_gpu_alone);
    RUN(nonsense_targets_run_nowhere);
    RUN(the_refusal_names_the_gpu_the_driver_and_the_way_out);
    return llmr_test_finish();
}
