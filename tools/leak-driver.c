/* Leak-check driver: N cycles of instantiate / initialize / set / step / get / FMU state
 * (get, serialize, deserialize, set, free) / terminate / free, for FMI 2 and FMI 3, against
 * the FMU library loaded with dlopen. Run under valgrind by tools/leak-check.sh.
 * Usage: leak-driver LIB.so RESOURCE_URI RESOURCE_PATH TOKEN CYCLES */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *comp;
typedef struct {
    void (*logger)(void *, const char *, int, const char *, const char *, ...);
    void *(*allocate)(size_t, size_t);
    void (*freemem)(void *);
    void *stepFinished;
    void *env;
} fmi2Callbacks;

static int errors = 0;
static int expect_error = 0;
static void logger2(void *env, const char *name, int status, const char *cat, const char *fmt, ...) {
    (void)env; (void)name; (void)cat;
    if (status >= 3 && !expect_error) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "fmi2 log [%d]: ", status);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        errors++;
    }
}
static void log3(void *env, int status, const char *cat, const char *msg) {
    (void)env; (void)cat;
    if (status >= 3) { fprintf(stderr, "fmi3 log [%d]: %s\n", status, msg); errors++; }
}

#define SYM(lib, name) void *name = dlsym(lib, #name); if (!name) { fprintf(stderr, "missing %s\n", #name); return 2; }
#define CHECK(x) do { int s_ = (x); if (s_ != 0) { fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #x, s_); return 1; } } while (0)

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: %s LIB URI PATH TOKEN CYCLES\n", argv[0]); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    const char *uri = argv[2], *path = argv[3], *token = argv[4];
    int cycles = atoi(argv[5]);
    SYM(lib, fmi2Instantiate) SYM(lib, fmi2SetupExperiment) SYM(lib, fmi2EnterInitializationMode)
    SYM(lib, fmi2ExitInitializationMode) SYM(lib, fmi2SetReal) SYM(lib, fmi2GetReal) SYM(lib, fmi2DoStep)
    SYM(lib, fmi2GetFMUstate) SYM(lib, fmi2SetFMUstate) SYM(lib, fmi2FreeFMUstate)
    SYM(lib, fmi2SerializedFMUstateSize) SYM(lib, fmi2SerializeFMUstate) SYM(lib, fmi2DeSerializeFMUstate)
    SYM(lib, fmi2Terminate) SYM(lib, fmi2FreeInstance)
    SYM(lib, fmi3InstantiateCoSimulation) SYM(lib, fmi3EnterInitializationMode) SYM(lib, fmi3ExitInitializationMode)
    SYM(lib, fmi3SetFloat64) SYM(lib, fmi3GetFloat64) SYM(lib, fmi3DoStep) SYM(lib, fmi3GetFMUState)
    SYM(lib, fmi3SetFMUState) SYM(lib, fmi3FreeFMUState) SYM(lib, fmi3SerializedFMUStateSize)
    SYM(lib, fmi3SerializeFMUState) SYM(lib, fmi3DeserializeFMUState) SYM(lib, fmi3Terminate) SYM(lib, fmi3FreeInstance)

    fmi2Callbacks cb = { logger2, calloc, free, NULL, NULL };
    /* Value references of the oscillator model: u (input) and x, force (outputs), looked up
     * by the script from modelDescription.xml. */
    unsigned vr_u = (unsigned)atoi(getenv("VR_U")), vr_x = (unsigned)atoi(getenv("VR_X"));
    for (int i = 0; i < cycles; i++) {
        /* FMI 2 */
        comp c = ((comp (*)(const char *, int, const char *, const char *, const fmi2Callbacks *, int, int))fmi2Instantiate)(
            "leak2", 1, token, uri, &cb, 0, 0);
        if (!c) { fprintf(stderr, "fmi2Instantiate failed\n"); return 1; }
        CHECK(((int (*)(comp, int, double, double, int, double))fmi2SetupExperiment)(c, 0, 0.0, 0.0, 0, 0.0));
        CHECK(((int (*)(comp))fmi2EnterInitializationMode)(c));
        CHECK(((int (*)(comp))fmi2ExitInitializationMode)(c));
        void *state = NULL;
        for (int k = 0; k < 10; k++) {
            double u = 0.01 * k, x;
            CHECK(((int (*)(comp, const unsigned *, size_t, const double *))fmi2SetReal)(c, &vr_u, 1, &u));
            CHECK(((int (*)(comp, double, double, int))fmi2DoStep)(c, 0.01 * k, 0.01, 1));
            CHECK(((int (*)(comp, const unsigned *, size_t, double *))fmi2GetReal)(c, &vr_x, 1, &x));
            if (k == 5) CHECK(((int (*)(comp, void **))fmi2GetFMUstate)(c, &state));
        }
        size_t n = 0;
        CHECK(((int (*)(comp, void *, size_t *))fmi2SerializedFMUstateSize)(c, state, &n));
        char *buf = malloc(n);
        CHECK(((int (*)(comp, void *, char *, size_t))fmi2SerializeFMUstate)(c, state, buf, n));
        void *state2 = NULL;
        CHECK(((int (*)(comp, const char *, size_t, void **))fmi2DeSerializeFMUstate)(c, buf, n, &state2));
        buf[n / 2] ^= 1; /* a corrupt copy must fail without leaking */
        void *bad = NULL;
        expect_error = 1;
        int bad_status = ((int (*)(comp, const char *, size_t, void **))fmi2DeSerializeFMUstate)(c, buf, n, &bad);
        expect_error = 0;
        if (bad_status != 3 || bad != NULL) { fprintf(stderr, "corrupt state accepted\n"); return 1; }
        free(buf);
        CHECK(((int (*)(comp, void *))fmi2SetFMUstate)(c, state2));
        CHECK(((int (*)(comp, void **))fmi2FreeFMUstate)(c, &state));
        CHECK(((int (*)(comp, void **))fmi2FreeFMUstate)(c, &state2));
        CHECK(((int (*)(comp))fmi2Terminate)(c));
        ((void (*)(comp))fmi2FreeInstance)(c);

        /* FMI 3 */
        comp d = ((comp (*)(const char *, const char *, const char *, bool, bool, bool, bool, const unsigned *, size_t, void *,
                            void (*)(void *, int, const char *, const char *), void *))fmi3InstantiateCoSimulation)(
            "leak3", token, path, false, false, false, false, NULL, 0, NULL, log3, NULL);
        if (!d) { fprintf(stderr, "fmi3InstantiateCoSimulation failed\n"); return 1; }
        CHECK(((int (*)(comp, bool, double, double, bool, double))fmi3EnterInitializationMode)(d, false, 0.0, 0.0, false, 0.0));
        CHECK(((int (*)(comp))fmi3ExitInitializationMode)(d));
        void *s3 = NULL;
        for (int k = 0; k < 10; k++) {
            double u = 0.01 * k, x, lst;
            bool a, b, e;
            CHECK(((int (*)(comp, const unsigned *, size_t, const double *, size_t))fmi3SetFloat64)(d, &vr_u, 1, &u, 1));
            CHECK(((int (*)(comp, double, double, bool, bool *, bool *, bool *, double *))fmi3DoStep)(d, 0.01 * k, 0.01, true, &a, &b, &e, &lst));
            CHECK(((int (*)(comp, const unsigned *, size_t, double *, size_t))fmi3GetFloat64)(d, &vr_x, 1, &x, 1));
            if (k == 5) CHECK(((int (*)(comp, void **))fmi3GetFMUState)(d, &s3));
        }
        CHECK(((int (*)(comp, void *, size_t *))fmi3SerializedFMUStateSize)(d, s3, &n));
        unsigned char *b3 = malloc(n);
        CHECK(((int (*)(comp, void *, unsigned char *, size_t))fmi3SerializeFMUState)(d, s3, b3, n));
        void *s4 = NULL;
        CHECK(((int (*)(comp, const unsigned char *, size_t, void **))fmi3DeserializeFMUState)(d, b3, n, &s4));
        free(b3);
        CHECK(((int (*)(comp, void *))fmi3SetFMUState)(d, s4));
        /* Negative control: LEAK_ON_PURPOSE=1 skips one free, which valgrind must report. */
        if (!getenv("LEAK_ON_PURPOSE")) CHECK(((int (*)(comp, void **))fmi3FreeFMUState)(d, &s3));
        CHECK(((int (*)(comp, void **))fmi3FreeFMUState)(d, &s4));
        CHECK(((int (*)(comp))fmi3Terminate)(d));
        ((void (*)(comp))fmi3FreeInstance)(d);
        /* An instantiation that fails (wrong token) must not leak either. */
        comp z = ((comp (*)(const char *, const char *, const char *, bool, bool, bool, bool, const unsigned *, size_t, void *,
                            void (*)(void *, int, const char *, const char *), void *))fmi3InstantiateCoSimulation)(
            "bad", "{wrong}", path, false, false, false, false, NULL, 0, NULL, NULL, NULL);
        if (z) { fprintf(stderr, "wrong token accepted\n"); return 1; }
    }
    dlclose(lib);
    if (errors != 0) { fprintf(stderr, "%d unexpected error messages\n", errors); return 1; }
    printf("%d cycles of FMI 2 and FMI 3 completed\n", cycles);
    return 0;
}
