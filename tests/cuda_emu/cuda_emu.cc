/* The CUDA emulation's runtime (see cuda_runtime.h for what it models):
 * blocks run one after another, each block's threads are coroutines on
 * their own stacks, and a thread gives up the CPU only where a GPU thread
 * could wait for others: __syncthreads, __syncwarp and warp shuffles.
 *
 * A collective completes when its last participant arrives; the arriving
 * thread then checks that every participant is at the same call site,
 * computes every lane's shuffle result and makes them all runnable again.
 * When no thread is runnable and some have not finished, the block is
 * stuck: that, a thread that exits while others wait at a barrier, and
 * participants at different call sites are launch errors, explained by
 * zc_emu_last_error().  A failed block's coroutines are abandoned where
 * they wait (the kernels hold no resources).
 *
 * Switching: on x86-64 a 20-instruction switch of the callee-saved
 * registers (ucontext's swapcontext makes a system call per switch, about
 * 1.5 us here, and a test case switches millions of times); ucontext on
 * other architectures.  Under AddressSanitizer the switches are announced
 * with its fiber interface. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "cuda_fp16.h"
#include "cuda_runtime.h"
#include "kernels/attn_math.h"

#if defined(__SANITIZE_ADDRESS__)
#define ZC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZC_EMU_ASAN 1
#endif
#endif
#ifdef ZC_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace zc_emu {

/* ---- context switch -------------------------------------------------------- */

#if defined(__x86_64__)
/* zc_emu_switch(&save, to): pushes the callee-saved registers, MXCSR and the
 * x87 control word on the current stack, stores the stack pointer in
 * *save, and resumes the stack `to` saved the same way (or built by
 * context_init). */
extern "C" void zc_emu_switch(void **save, void *to);
asm(".text\n"
    ".p2align 4\n"
    ".type zc_emu_switch, @function\n"
    "zc_emu_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size zc_emu_switch, .-zc_emu_switch\n");

struct context_t {
    void *sp;
};

/* A fresh stack whose first switch "returns" into entry() with the stack
 * aligned as after a call (rsp = 8 mod 16); entry never returns. */
static void context_init(context_t *c, char *stack, size_t size, void (*entry)())
{
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)top;
    uint32_t mxcsr;
    uint16_t fpcw;

    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpcw));
    *--sp = 0;                   /* entry's return address: none */
    *--sp = (uint64_t)entry;     /* popped by ret */
    for (int r = 0; r < 6; r++)  /* rbp rbx r12 r13 r14 r15 */
        *--sp = 0;
    *--sp = (uint64_t)mxcsr | (uint64_t)fpcw << 32;
    c->sp = sp;
}

static void context_switch(context_t *from, context_t *to)
{
    zc_emu_switch(&from->sp, to->sp);
}
#else
struct context_t {
    ucontext_t uc;
};

static void context_init(context_t *c, char *stack, size_t size, void (*entry)())
{
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}

static void context_switch(context_t *from, context_t *to)
{
    swapcontext(&from->uc, &to->uc);
}
#endif

/* ---- state ------------------------------------------------------------------- */

enum state_t { RUNNABLE, AT_BARRIER, AT_WARP, DONE };

struct site_t {
    const char *file;
    int line;
    bool operator!=(const site_t &o) const { return line != o.line || strcmp(file, o.file); }
};

struct thread_t {
    context_t ctx;
    char *stack;
    uint3 idx;
    int linear, lane, warp;
    state_t state;
    site_t site;            /* of the collective it waits at */
    collective_t kind;
    unsigned mask;
    int arg;
    uint64_t value, result; /* shuffle operand and result */
    const void *op_in;      /* mma and ldmatrix operands and results */
    void *op_out;
    std::vector<struct async_copy_t> copies; /* cp.async not yet waited for */
    int groups;             /* cp.async groups committed */
    void *asan_fake;
};

/* One cp.async in flight: the bytes it read, and its group (the number of
 * groups its thread had committed when it was issued). */
struct async_copy_t {
    char *dst;
    unsigned char data[16];
    int bytes, group;
};

/* 256 KiB per coroutine: a kernel frame is a few KiB, but libm and
 * AddressSanitizer's redzones want room. */
static const size_t stack_bytes = 256 << 10;
static const size_t default_smem_limit = 48 << 10, optin_smem_limit = 227 << 10;

static std::vector<thread_t> threads;     /* of the running block */
static std::vector<char *> stacks;        /* reused across blocks */
static context_t sched_ctx;
static thread_t *running;
static void (*block_run)(void *);
static void *block_call;
static int block_threads, barrier_count;
static std::vector<int> warp_count;       /* lanes waiting, per warp */
static std::string block_error;
static bool block_failed;

/* Runnable threads as a bit set: the scheduler picks the lowest, or the
 * k-th of them, without scanning the block at every switch. */
static uint64_t runnable[1024 / 64];
static int n_runnable;

static zc_emu_schedule_t schedule = ZC_EMU_THREAD_ORDER;
static uint64_t rng_state = 1;
static char *shared_base;
static size_t shared_bytes;
static std::map<const void *, int> max_dynamic_smem;
static cudaError_t last_error = cudaSuccess;
static std::string last_message;
static uint64_t n_blocks, n_switches, n_mma, n_ldmatrix, n_conflicts;

uint3 thread_idx, block_idx;
dim3 block_dim, grid_dim;

#ifdef ZC_EMU_ASAN
static const void *sched_stack_bottom;
static size_t sched_stack_size;
#endif

static void set_state(thread_t &t, state_t state)
{
    const uint64_t bit = 1ull << (t.linear % 64);
    uint64_t &word = runnable[t.linear / 64];

    if (state == RUNNABLE && !(word & bit))
        word |= bit, n_runnable++;
    else if (state != RUNNABLE && (word & bit))
        word &= ~bit, n_runnable--;
    t.state = state;
}

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (block_failed)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    block_failed = true;
    block_error = msg;
}

static uint64_t next_random()
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const char *collective_name(collective_t k)
{
    static const char *const names[] = {"__syncwarp", "__shfl_sync", "__shfl_xor_sync",
                                        "mma.sync", "ldmatrix"};
    return names[k];
}

/* ---- switching ----------------------------------------------------------------- */

/* From a thread back to the scheduler; returns when it is resumed. */
static void yield()
{
    thread_t *self = running;

    n_switches++;
#ifdef ZC_EMU_ASAN
    __sanitizer_start_switch_fiber(self->state == DONE ? NULL : &self->asan_fake,
                                   sched_stack_bottom, sched_stack_size);
#endif
    context_switch(&self->ctx, &sched_ctx);
#ifdef ZC_EMU_ASAN
    __sanitizer_finish_switch_fiber(self->asan_fake, NULL, NULL);
#endif
}

static void resume(thread_t *t)
{
    running = t;
    thread_idx = t->idx;
#ifdef ZC_EMU_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, t->stack, stack_bytes);
#endif
    context_switch(&sched_ctx, &t->ctx);
#ifdef ZC_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, &sched_stack_bottom, &sched_stack_size);
#endif
    running = NULL;
}

static void thread_entry()
{
#ifdef ZC_EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, &sched_stack_bottom, &sched_stack_size);
#endif
    thread_t *self = running;

    block_run(block_call);
    set_state(*self, DONE);
    /* Others waiting for this thread will wait forever: say which. */
    for (thread_t &t : threads)
        if (t.state == AT_BARRIER) {
            fail("__syncthreads at %s:%d is reached by part of the block only: thread %d "
                 "exited while %d of %d threads wait there", t.site.file, t.site.line,
                 self->linear, barrier_count, block_threads);
            break;
        }
    if (warp_count[self->warp] > 0)
        for (thread_t &t : threads)
            if (t.warp == self->warp && t.state == AT_WARP) {
                fail("%s at %s:%d is reached by part of warp %d only: lane %d exited while %d "
                     "lanes wait there", collective_name(t.kind), t.site.file, t.site.line,
                     self->warp, self->lane, warp_count[self->warp]);
                break;
            }
    yield();
    abort(); /* a finished coroutine is never resumed */
}

/* ---- collectives ------------------------------------------------------------------ */

void syncthreads(const char *file, int line)
{
    thread_t *self = running;

    set_state(*self, AT_BARRIER);
    self->site = {file, line};
    if (++barrier_count == block_threads) {
        /* Everyone is here: at the same barrier? */
        for (thread_t &t : threads)
            if (t.site != self->site)
                fail("__syncthreads at %s:%d and at %s:%d: threads of one block wait at "
                     "different barriers", t.site.file, t.site.line, file, line);
        for (thread_t &t : threads)
            set_state(t, RUNNABLE);
        barrier_count = 0;
        /* The last arrival does not run on: a GPU gives no thread priority
         * after a barrier, so the scheduler chooses again. */
    } else {
        for (thread_t &t : threads)
            if (t.state == DONE) {
                fail("__syncthreads at %s:%d is reached by part of the block only: thread %d "
                     "has exited", file, line, t.linear);
                break;
            }
    }
    yield();
}

static void complete_mma(thread_t *lanes, int arg);
static void complete_ldmatrix(thread_t *lanes, int arg, const char *file, int line);

uint64_t warp_collective(collective_t kind, unsigned mask, uint64_t value, int arg,
                         const char *file, int line)
{
    thread_t *self = running;
    const int w = self->warp, first = w * 32;
    const int lanes = block_threads - first < 32 ? block_threads - first : 32;
    const unsigned all = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;

    if (mask != all)
        fail("%s at %s:%d with mask 0x%08x: the emulation supports the whole warp (0x%08x) "
             "only", collective_name(kind), file, line, mask, all);
    set_state(*self, AT_WARP);
    self->site = {file, line};
    self->kind = kind;
    self->mask = mask;
    self->arg = arg;
    self->value = value;
    if (++warp_count[w] == lanes) {
        for (int l = 0; l < lanes; l++) {
            thread_t &t = threads[first + l];
            if (t.site != self->site || t.kind != kind)
                fail("lanes of warp %d at different warp collectives: %s at %s:%d and %s at "
                     "%s:%d", w, collective_name(t.kind), t.site.file, t.site.line,
                     collective_name(kind), file, line);
            else if ((kind == MMA || kind == LDMATRIX) && t.arg != arg)
                fail("%s at %s:%d: lanes of warp %d disagree on the shape", collective_name(kind),
                     file, line, w);
        }
        if ((kind == MMA || kind == LDMATRIX) && lanes != 32)
            fail("%s at %s:%d: a warp of %d lanes (the instruction takes 32)",
                 collective_name(kind), file, line, lanes);
        if (!block_failed && kind == MMA)
            complete_mma(&threads[first], arg);
        if (!block_failed && kind == LDMATRIX)
            complete_ldmatrix(&threads[first], arg, file, line);
        for (int l = 0; l < lanes; l++) {
            thread_t &t = threads[first + l];
            int src = kind == SHFL_IDX ? (t.arg & 31) : kind == SHFL_XOR ? (l ^ (t.arg & 31)) : l;
            if (src >= lanes)
                fail("%s at %s:%d reads lane %d of a warp of %d", collective_name(kind), file,
                     line, src, lanes);
            t.result = src < lanes ? threads[first + src].value : t.value;
            set_state(t, RUNNABLE);
        }
        warp_count[w] = 0;
    } else {
        for (int l = 0; l < lanes; l++)
            if (threads[first + l].state == DONE) {
                fail("%s at %s:%d is reached by part of warp %d only: lane %d has exited",
                     collective_name(kind), file, line, w, l);
                break;
            }
    }
    yield();
    return self->result;
}

/* ---- tensor cores and asynchronous copies ------------------------------------------- */

/* An element of a 16-bit operand register: the lower index in the low half. */
static float operand(uint32_t reg, int half, bool f16)
{
    uint16_t bits = (uint16_t)(reg >> (16 * half));

    return f16 ? __half2float(__half{bits}) : zc_bf16_to_float(bits);
}

/* The fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix Fragments for
 * mma.m16n8k16 with floating point type"), for lane l, group g = l / 4 and
 * t = l % 4:
 *   A (16 x 16, row): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..], a[2] =
 *     A[g][2t+8..], a[3] = A[g+8][2t+8..];
 *   B (16 x 8, col):  b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g];
 *   C, D (16 x 8):    c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..].
 * Each element of D is the float64 sum of its 16 exact products and its C,
 * rounded once to float (see README.md: hardware's order differs). */
static void complete_mma(thread_t *lanes, int arg)
{
    const bool f16 = arg != 0;
    float A[16][16], B[16][8], C[16][8];

    for (int l = 0; l < 32; l++) {
        const uint32_t *a = (const uint32_t *)lanes[l].op_in, *b = a + 4;
        const float *c = (const float *)(a + 6);
        const int g = l / 4, t = l % 4;
        for (int e = 0; e < 2; e++) {
            A[g][2 * t + e] = operand(a[0], e, f16);
            A[g + 8][2 * t + e] = operand(a[1], e, f16);
            A[g][2 * t + 8 + e] = operand(a[2], e, f16);
            A[g + 8][2 * t + 8 + e] = operand(a[3], e, f16);
            B[2 * t + e][g] = operand(b[0], e, f16);
            B[2 * t + 8 + e][g] = operand(b[1], e, f16);
            C[g][2 * t + e] = c[e];
            C[g + 8][2 * t + e] = c[2 + e];
        }
    }
    for (int l = 0; l < 32; l++) {
        float *d = (float *)lanes[l].op_out;
        const int g = l / 4, t = l % 4;
        for (int r = 0; r < 4; r++) {
            const int i = g + 8 * (r / 2), j = 2 * t + r % 2;
            double acc = C[i][j];
            for (int k = 0; k < 16; k++)
                acc += (double)A[i][k] * B[k][j];
            d[r] = (float)acc;
        }
    }
    n_mma++;
}

static bool in_shared(const void *p, size_t bytes)
{
    return shared_base && (const char *)p >= shared_base &&
           (const char *)p + bytes <= shared_base + shared_bytes;
}

/* ldmatrix: matrix i's row r is the 16 bytes at lane 8i + r's address;
 * lane l gets, of each matrix, elements (l / 4, 2(l % 4) .. +1), or with
 * .trans elements (2(l % 4) .. +1, l / 4), the lower in the low half.
 * Rows of one matrix in the same bank group (16-byte slot of a 128-byte
 * line) are a bank conflict: counted (extra wavefronts). */
static void complete_ldmatrix(thread_t *lanes, int arg, const char *file, int line)
{
    const int count = arg & 7;
    const bool trans = arg & 8;

    for (int l = 0; l < 8 * count; l++) {
        const char *p = (const char *)lanes[l].op_in;
        if (!in_shared(p, 16) || ((uintptr_t)(p - shared_base) & 15)) {
            fail("ldmatrix at %s:%d: lane %d's row address %p is not 16 aligned in shared "
                 "memory", file, line, l, (const void *)p);
            return;
        }
    }
    for (int m = 0; m < count; m++) {
        uint16_t M[8][8];
        int slots[8] = {0}, worst = 0;
        for (int r = 0; r < 8; r++) {
            const char *p = (const char *)lanes[8 * m + r].op_in;
            memcpy(M[r], p, 16);
            int s = ++slots[((p - shared_base) >> 4) & 7];
            worst = s > worst ? s : worst;
        }
        n_conflicts += worst - 1;
        for (int l = 0; l < 32; l++) {
            const int g = l / 4, t = l % 4;
            uint16_t lo = trans ? M[2 * t][g] : M[g][2 * t];
            uint16_t hi = trans ? M[2 * t + 1][g] : M[g][2 * t + 1];
            ((uint32_t *)lanes[l].op_out)[m] = (uint32_t)lo | (uint32_t)hi << 16;
        }
    }
    n_ldmatrix++;
}

void mma_m16n8k16(bool f16, float d[4], const uint32_t a[4], const uint32_t b[2],
                  const float c[4], const char *file, int line)
{
    uint32_t in[10];

    memcpy(in, a, 16);
    memcpy(in + 4, b, 8);
    memcpy(in + 6, c, 16);
    running->op_in = in;
    running->op_out = d;
    warp_collective(MMA, 0xffffffffu, 0, f16, file, line);
}

void ldmatrix(int count, bool trans, uint32_t *r, const void *row, const char *file, int line)
{
    running->op_in = row;
    running->op_out = r;
    warp_collective(LDMATRIX, 0xffffffffu, 0, count | (trans ? 8 : 0), file, line);
}

void cp_async(void *dst, const void *src, int src_bytes, const char *file, int line)
{
    thread_t *self = running;
    async_copy_t c;

    if (!in_shared(dst, 16) || ((uintptr_t)((char *)dst - shared_base) & 15) ||
        ((uintptr_t)src & 15) || src_bytes < 0 || src_bytes > 16) {
        fail("cp.async at %s:%d: destination %p must be 16 aligned in shared memory, source "
             "%p 16 aligned, %d bytes of 0..16", file, line, dst, src, src_bytes);
        return;
    }
    c.dst = (char *)dst;
    memset(c.data, 0, sizeof c.data);
    memcpy(c.data, src, (size_t)src_bytes);
    c.bytes = 16;
    c.group = self->groups;
    self->copies.push_back(c);
    memset(dst, 0xff, 16); /* in flight: NaN to whoever reads it */
}

void cp_async_commit()
{
    running->groups++;
}

/* Complete this thread's copies of every committed group but the newest
 * `pending`. */
void cp_async_wait(int pending)
{
    thread_t *self = running;
    std::vector<async_copy_t> &v = self->copies;
    size_t kept = 0;

    for (size_t i = 0; i < v.size(); i++) {
        if (v[i].group < self->groups - pending)
            memcpy(v[i].dst, v[i].data, (size_t)v[i].bytes);
        else
            v[kept++] = v[i];
    }
    v.resize(kept);
}

/* ---- blocks and launches ---------------------------------------------------------- */

/* No thread can run: name what each waits at. */
static void diagnose_stuck()
{
    std::string what;
    int shown = 0;

    for (thread_t &t : threads) {
        if (t.state == DONE || shown == 4)
            continue;
        char one[160];
        snprintf(one, sizeof one, "%sthread %d at %s %s:%d", shown ? ", " : "", t.linear,
                 t.state == AT_BARRIER ? "__syncthreads" : collective_name(t.kind),
                 t.site.file, t.site.line);
        what += one;
        shown++;
    }
    fail("the block is stuck (%s%s): a barrier or warp collective that not every thread "
         "reaches", what.c_str(), shown == 4 ? ", ..." : "");
}

static void run_block()
{
    int left = block_threads;

    block_failed = false;
    barrier_count = 0;
    memset(runnable, 0, sizeof runnable);
    n_runnable = 0;
    warp_count.assign((block_threads + 31) / 32, 0);
    /* Shared memory as a GPU leaves it: anything.  All-ones bytes are a NaN
     * as float and -1 as int, so a read before the write shows. */
    if (shared_base)
        memset(shared_base, 0xff, shared_bytes);
    for (int i = 0; i < block_threads; i++) {
        thread_t &t = threads[i];
        t.linear = i;
        t.idx = {(unsigned)i % block_dim.x, (unsigned)i / block_dim.x % block_dim.y,
                 (unsigned)i / (block_dim.x * block_dim.y)};
        t.lane = i % 32;
        t.warp = i / 32;
        set_state(t, RUNNABLE);
        t.site = {"", 0};
        t.copies.clear();
        t.groups = 0;
        t.asan_fake = NULL;
        t.stack = stacks[i];
        context_init(&t.ctx, t.stack, stack_bytes, thread_entry);
    }
    while (left > 0 && !block_failed) {
        thread_t *next = NULL;
        if (n_runnable > 0) {
            /* the lowest runnable thread, or the k-th for k drawn at random */
            uint64_t k = schedule == ZC_EMU_THREAD_ORDER ? 0 : next_random() % n_runnable;
            for (int w = 0; !next; w++) {
                uint64_t word = runnable[w];
                int count = __builtin_popcountll(word);
                if (k >= (uint64_t)count) {
                    k -= count;
                    continue;
                }
                while (k--)
                    word &= word - 1;
                next = &threads[w * 64 + __builtin_ctzll(word)];
            }
        }
        if (!next) {
            diagnose_stuck();
            break;
        }
        resume(next);
        if (next->state == DONE)
            left--;
    }
    n_blocks++;
}

static char *new_stack()
{
    /* A guard page below the stack turns an overflow into a crash. */
    long page = sysconf(_SC_PAGESIZE);
    char *p = (char *)mmap(NULL, stack_bytes + page, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        perror("cuda_emu: mmap of a coroutine stack");
        abort();
    }
    mprotect(p, page, PROT_NONE);
    return p + page;
}

static cudaError_t launch_error(cudaError_t err, const std::string &msg)
{
    last_error = err;
    last_message = msg;
    return err;
}

cudaError_t launch(const void *kernel, dim3 grid, dim3 block, size_t smem, void (*run)(void *),
                   void *call)
{
    const uint64_t nthreads = (uint64_t)block.x * block.y * block.z;
    char msg[256];

    if (running)
        return launch_error(cudaErrorLaunchFailure, "a kernel launched from a kernel");
    if (nthreads == 0 || nthreads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 ||
        grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
        snprintf(msg, sizeof msg, "launch of grid (%u, %u, %u) of blocks (%u, %u, %u): out of "
                 "the device's limits", grid.x, grid.y, grid.z, block.x, block.y, block.z);
        return launch_error(cudaErrorInvalidConfiguration, msg);
    }
    auto opt = max_dynamic_smem.find(kernel);
    size_t limit = opt == max_dynamic_smem.end() ? default_smem_limit : (size_t)opt->second;
    if (smem > limit || smem > shared_bytes) {
        snprintf(msg, sizeof msg, "%zu bytes of dynamic shared memory: the kernel allows %zu "
                 "(cudaFuncSetAttribute raises the 48 KiB default), the emulation has %zu",
                 smem, limit, shared_bytes);
        return launch_error(cudaErrorInvalidValue, msg);
    }
    block_dim = block;
    grid_dim = grid;
    block_threads = (int)nthreads;
    threads.assign(nthreads, thread_t());
    while (stacks.size() < nthreads)
        stacks.push_back(new_stack());
    block_run = run;
    block_call = call;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                block_idx = {x, y, z};
                run_block();
                if (block_failed) {
                    snprintf(msg, sizeof msg, "block (%u, %u, %u): ", x, y, z);
                    return launch_error(cudaErrorLaunchFailure, msg + block_error);
                }
            }
    return cudaSuccess;
}

cudaError_t set_max_dynamic_smem(const void *kernel, int bytes)
{
    if (bytes < 0 || (size_t)bytes > optin_smem_limit)
        return launch_error(cudaErrorInvalidValue, "cudaFuncSetAttribute: above 227 KiB");
    max_dynamic_smem[kernel] = bytes;
    return cudaSuccess;
}

cudaError_t take_last_error()
{
    cudaError_t err = last_error;

    last_error = cudaSuccess;
    return err;
}

const char *error_string(cudaError_t err)
{
    switch (err) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorInvalidConfiguration:
        return "invalid configuration argument";
    case cudaErrorLaunchFailure:
        return "unspecified launch failure";
    }
    return "unknown error";
}

} // namespace zc_emu

extern "C" void zc_emu_set_schedule(zc_emu_schedule_t schedule, uint64_t seed)
{
    zc_emu::schedule = schedule;
    zc_emu::rng_state = seed;
}

extern "C" void zc_emu_set_shared(void *base, size_t bytes)
{
    zc_emu::shared_base = (char *)base;
    zc_emu::shared_bytes = bytes;
}

extern "C" const char *zc_emu_last_error(void)
{
    return zc_emu::last_message.c_str();
}

extern "C" void zc_emu_counters(uint64_t *blocks, uint64_t *switches)
{
    *blocks = zc_emu::n_blocks;
    *switches = zc_emu::n_switches;
}

extern "C" void zc_emu_tensor_counters(uint64_t *mma, uint64_t *ldmatrix, uint64_t *conflicts)
{
    *mma = zc_emu::n_mma;
    *ldmatrix = zc_emu::n_ldmatrix;
    *conflicts = zc_emu::n_conflicts;
}
