/* FMU call overhead (issue 7): a compiled master calling the FMU library through dlopen, as a
 * co-simulation master would, on a trivial model (one particle on a spring). Per call, in
 * nanoseconds of this thread's CPU time, median / min / max over REPEATS batches:
 *   c_indirect         an indirect call of an empty C function (the floor of any call)
 *   clock_thread_cpu   clock_gettime(CLOCK_THREAD_CPUTIME_ID) (our doStep reads it twice)
 *   fmi3_null          fmi3GetFloat64(NULL, ...): the ABI entry and the NULL check only
 *   fmi3_get1          fmi3GetFloat64 with one value reference (boundary + a cheap body)
 *   fmi2_get1          fmi2GetReal, same
 *   fmi3_set1          fmi3SetFloat64 of the input, one value reference
 *   fmi3_dostep_tiny   fmi3DoStep with h = 1e-9 s (one tiny integrator step)
 *   fmi3_dostep        fmi3DoStep with h = 1 ms (the real thing: steps inside)
 *   fmi2_dostep        fmi2DoStep with h = 1 ms
 * Prints one JSON object. Usage: fmu-overhead LIB.so RESOURCE_PATH TOKEN VR_U VR_X [REPEATS] */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void *comp;
typedef struct {
    void (*logger)(void *, const char *, int, const char *, const char *, ...);
    void *(*allocate)(size_t, size_t);
    void (*freemem)(void *);
    void *stepFinished;
    void *env;
} fmi2Callbacks;

static void logger2(void *env, const char *name, int status, const char *cat, const char *fmt, ...) {
    (void)env; (void)name; (void)cat;
    if (status >= 3) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "fmi2 log [%d]: ", status);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
}
static void log3(void *env, int status, const char *cat, const char *msg) {
    (void)env; (void)cat;
    if (status >= 3) fprintf(stderr, "fmi3 log [%d]: %s\n", status, msg);
}

static double cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MAXREP 64
static int first = 1;
static void emit(const char *name, double *ns, int r, long calls) {
    qsort(ns, r, sizeof(double), cmp);
    double med = r % 2 ? ns[r / 2] : 0.5 * (ns[r / 2 - 1] + ns[r / 2]);
    printf("%s\n  \"%s\": {\"median_ns\": %.2f, \"min_ns\": %.2f, \"max_ns\": %.2f, \"repeats\": %d, \"calls_per_repeat\": %ld}",
           first ? "" : ",", name, med, ns[0], ns[r - 1], r, calls);
    first = 0;
}

/* Time `calls` executions of STMT, REPEATS times; ns per call. */
#define BENCH(name, calls, STMT)                                                   \
    do {                                                                           \
        double ns_[MAXREP];                                                        \
        for (int r_ = 0; r_ < repeats; r_++) {                                     \
            double t0_ = cpu_ns();                                                 \
            for (long i_ = 0; i_ < (calls); i_++) { STMT; }                        \
            ns_[r_] = (cpu_ns() - t0_) / (double)(calls);                          \
        }                                                                          \
        emit(name, ns_, repeats, calls);                                           \
    } while (0)

static int empty_fn(void *p, int k) { return p != NULL && k < 0; }

#define SYM(lib, name) void *name = dlsym(lib, #name); if (!name) { fprintf(stderr, "missing %s\n", #name); return 2; }
#define CHECK(x) do { int s_ = (x); if (s_ != 0) { fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #x, s_); return 1; } } while (0)

typedef int (*get3_t)(comp, const unsigned *, size_t, double *, size_t);
typedef int (*set3_t)(comp, const unsigned *, size_t, const double *, size_t);
typedef int (*step3_t)(comp, double, double, bool, bool *, bool *, bool *, double *);
typedef int (*get2_t)(comp, const unsigned *, size_t, double *);
typedef int (*step2_t)(comp, double, double, int);

int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: %s LIB PATH TOKEN VR_U VR_X [REPEATS]\n", argv[0]); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    const char *path = argv[2], *token = argv[3];
    unsigned vr_u = (unsigned)atoi(argv[4]), vr_x = (unsigned)atoi(argv[5]);
    int repeats = argc > 6 ? atoi(argv[6]) : 7;
    if (repeats < 1 || repeats > MAXREP) repeats = 7;
    SYM(lib, fmi2Instantiate) SYM(lib, fmi2SetupExperiment) SYM(lib, fmi2EnterInitializationMode)
    SYM(lib, fmi2ExitInitializationMode) SYM(lib, fmi2GetReal) SYM(lib, fmi2DoStep) SYM(lib, fmi2FreeInstance)
    SYM(lib, fmi3InstantiateCoSimulation) SYM(lib, fmi3EnterInitializationMode) SYM(lib, fmi3ExitInitializationMode)
    SYM(lib, fmi3SetFloat64) SYM(lib, fmi3GetFloat64) SYM(lib, fmi3DoStep) SYM(lib, fmi3FreeInstance)

    comp d = ((comp (*)(const char *, const char *, const char *, bool, bool, bool, bool, const unsigned *, size_t, void *,
                        void (*)(void *, int, const char *, const char *), void *))fmi3InstantiateCoSimulation)(
        "overhead3", token, path, false, false, false, false, NULL, 0, NULL, log3, NULL);
    if (!d) { fprintf(stderr, "fmi3InstantiateCoSimulation failed\n"); return 1; }
    CHECK(((int (*)(comp, bool, double, double, bool, double))fmi3EnterInitializationMode)(d, false, 0.0, 0.0, false, 0.0));
    CHECK(((int (*)(comp))fmi3ExitInitializationMode)(d));

    get3_t get3 = (get3_t)fmi3GetFloat64;
    set3_t set3 = (set3_t)fmi3SetFloat64;
    step3_t step3 = (step3_t)fmi3DoStep;
    int (*volatile empty)(void *, int) = empty_fn;
    volatile double sink = 0.0;
    volatile int vs = 0;
    double x = 0.0, t = 0.0, lst;
    bool a, b, e;
    const long n_cheap = 1000000;

    printf("{");
    BENCH("c_indirect", n_cheap, vs += empty(&x, (int)i_));
    BENCH("clock_thread_cpu", 200000, sink += cpu_ns());
    BENCH("fmi3_null", n_cheap, vs += get3(NULL, &vr_x, 1, &x, 1));
    BENCH("fmi3_get1", n_cheap, { get3(d, &vr_x, 1, &x, 1); sink += x; });
    BENCH("fmi3_set1", n_cheap, { double u = 1e-3 * (double)(i_ & 1); set3(d, &vr_u, 1, &u, 1); });
    /* Tiny steps: each one still runs the co-simulation layer and one integrator step. */
    BENCH("fmi3_dostep_tiny", 20000, { if (step3(d, t, 1e-9, true, &a, &b, &e, &lst)) return 1; t += 1e-9; });
    BENCH("fmi3_dostep", 2000, { if (step3(d, t, 1e-3, true, &a, &b, &e, &lst)) return 1; t += 1e-3; });
    ((void (*)(comp))fmi3FreeInstance)(d);

    fmi2Callbacks cb = { logger2, calloc, free, NULL, NULL };
    comp c = ((comp (*)(const char *, int, const char *, const char *, const fmi2Callbacks *, int, int))fmi2Instantiate)(
        "overhead2", 1, token, getenv("RESOURCE_URI"), &cb, 0, 0);
    if (!c) { fprintf(stderr, "fmi2Instantiate failed\n"); return 1; }
    CHECK(((int (*)(comp, int, double, double, int, double))fmi2SetupExperiment)(c, 0, 0.0, 0.0, 0, 0.0));
    CHECK(((int (*)(comp))fmi2EnterInitializationMode)(c));
    CHECK(((int (*)(comp))fmi2ExitInitializationMode)(c));
    get2_t get2 = (get2_t)fmi2GetReal;
    step2_t step2 = (step2_t)fmi2DoStep;
    BENCH("fmi2_get1", n_cheap, { get2(c, &vr_x, 1, &x); sink += x; });
    t = 0.0;
    BENCH("fmi2_dostep", 2000, { if (step2(c, t, 1e-3, 1)) return 1; t += 1e-3; });
    ((void (*)(comp))fmi2FreeInstance)(c);
    printf("\n}\n");
    (void)sink;
    dlclose(lib);
    return 0;
}
