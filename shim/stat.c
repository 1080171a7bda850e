/* The stat fast path, placed inside tracees (see src/lib.rs, "stat").
 *
 * A patched `mov eax, NR; syscall` in the guest jumps to a per-site stub,
 * which calls shim_stat_entry. The real call runs here, through the one
 * syscall instruction the seccomp filter lets pass (shim_raw), and its
 * answer is rewritten as the supervisor would: virtual device and inode
 * numbers from the tables in the shared file, and the fixed time of files
 * that predate the run. Anything else (a time set during the run, a device
 * not numbered yet, a full table, the clock at its limit) makes the same
 * call again through a trapped syscall instruction, and the supervisor
 * answers it. Only one tracee thread runs at a time, so the tables change in
 * the same order in every run.
 *
 * Built freestanding (no libc, no relocations: every address is a
 * constant) and linked at the address it runs at (build.rs). The layout
 * constants come from build.rs as -D options, from src/lib.rs.
 */

typedef unsigned long u64;
typedef unsigned int u32;

#define SLOT(i) (((volatile u64 *)DATA_ADDR)[i])
#define TABLE ((volatile u64 *)(DATA_ADDR + TABLE_OFF))

#define NR_READ 0
#define NR_STAT 4
#define NR_FSTAT 5
#define NR_LSTAT 6
#define NR_NEWFSTATAT 262
#define NR_STATX 332
#define AT_EMPTY_PATH 0x1000

/* Not handled here: make the call trapped, as an event (the supervisor
 * must look now: the clock is at its limit) or quietly (only the answer is
 * the supervisor's: the call was charged here, and the trap is no
 * scheduling point, so whether a call is answered here or there, which can
 * depend on files other programs change, never changes the schedule). */
#define FALLBACK 1
#define QUIET 2
/* Answered here: the result is in f[0]. */
#define DONE 0

long shim_raw(long nr, long a0, long a1, long a2, long a3, long a4, long a5);

/* Entry from a site stub: rax = the syscall number, arguments in their
 * syscall registers, the red zone already skipped. Keeps every register a
 * syscall keeps. f[0..7] = nr, rdi, rsi, rdx, r10, r8, r9; an answer
 * made here replaces f[0]. */
__asm__(".section .text.entry,\"ax\"\n"
        ".globl shim_stat_entry\n"
        "shim_stat_entry:\n"
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  push %r9\n"
        "  push %r8\n"
        "  push %r10\n"
        "  push %rdx\n"
        "  push %rsi\n"
        "  push %rdi\n"
        "  push %rax\n"
        "  mov %rsp, %rdi\n"
        "  and $-16, %rsp\n"
        "  call shim_stat\n"
        "  lea -56(%rbp), %rsp\n"
        "  cmp $1, %rax\n"
        "  je 2f\n"
        "  cmp $2, %rax\n"
        "  jne 3f\n"
        "  call shim_load\n"
        "  syscall\n" /* trapped quietly */
        ".globl shim_quiet_ip\n"
        "shim_quiet_ip:\n"
        "  jmp 1f\n"
        "2:\n"
        "  call shim_load\n"
        "  syscall\n" /* trapped: an event */
        "  jmp 1f\n"
        "3:\n"
        "  mov (%rsp), %rax\n" /* DONE: the answer */
        "1:\n"
        "  mov 8(%rsp), %rdi\n"
        "  mov 16(%rsp), %rsi\n"
        "  mov 24(%rsp), %rdx\n"
        "  mov 32(%rsp), %r10\n"
        "  mov 40(%rsp), %r8\n"
        "  mov 48(%rsp), %r9\n"
        "  mov %rbp, %rsp\n"
        "  pop %rbp\n"
        "  ret\n"
        /* The saved call (above the return address) back in its registers. */
        "shim_load:\n"
        "  mov 8(%rsp), %rax\n"
        "  mov 16(%rsp), %rdi\n"
        "  mov 24(%rsp), %rsi\n"
        "  mov 32(%rsp), %rdx\n"
        "  mov 40(%rsp), %r10\n"
        "  mov 48(%rsp), %r8\n"
        "  mov 56(%rsp), %r9\n"
        "  ret\n"
        /* The syscall instruction the filter allows (its end is shim_raw_ip). */
        ".globl shim_raw\n"
        "shim_raw:\n"
        "  mov %rdi, %rax\n"
        "  mov %rsi, %rdi\n"
        "  mov %rdx, %rsi\n"
        "  mov %rcx, %rdx\n"
        "  mov %r8, %r10\n"
        "  mov %r9, %r8\n"
        "  mov 8(%rsp), %r9\n"
        "  syscall\n"
        ".globl shim_raw_ip\n"
        "shim_raw_ip:\n"
        "  ret\n"
        ".text\n");

static u64 rd64(const unsigned char *p) {
    u64 v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void wr64(unsigned char *p, u64 v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static u32 rd32(const unsigned char *p) {
    return (u32)p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24;
}

static void wr32(unsigned char *p, u32 v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Same function as detrun_shim::ino_slot. */
static u64 slot_of(u64 dev, u64 ino) {
    return ((dev * 0x9E3779B97F4A7C15UL) ^ (ino * 0xC2B2AE3D27D4EB4FUL)) >> (64 - TABLE_BITS);
}

/* Virtual device number, or 0: not numbered yet. */
static u64 vdev_of(u64 dev) {
    u64 n = SLOT(DEV_COUNT);
    for (u64 i = 0; i < n && i < DEV_SLOTS; i++)
        if (SLOT(DEVS + 2 * i) == dev) return SLOT(DEVS + 2 * i + 1);
    return 0;
}

/* The table entry of (dev, ino), or the empty one it would take; -1: the
 * table is at its load limit and the key is not in it. */
static long find(u64 dev, u64 ino) {
    u64 mask = (1UL << TABLE_BITS) - 1;
    for (u64 i = slot_of(dev, ino), n = 0; n <= mask; i = (i + 1) & mask, n++) {
        volatile u64 *e = TABLE + 3 * i;
        if (e[2] == 0) return SLOT(INO_COUNT) >= TABLE_LIMIT ? -1 : (long)i;
        if (e[0] == dev && e[1] == ino) return (long)i;
    }
    return -1;
}

static void put_statx_ts(unsigned char *p, u64 ns) {
    wr64(p, ns / 1000000000UL);
    wr32(p + 8, (u32)(ns % 1000000000UL));
}

static void put_stat_ts(unsigned char *p, u64 ns) {
    wr64(p, ns / 1000000000UL);
    wr64(p + 8, ns % 1000000000UL);
}

static int ends_with_py(const char *p) {
    if (!p) return 0;
    u64 n = 0;
    while (n < 4096 && p[n]) n++;
    return n >= 3 && p[n - 3] == '.' && p[n - 2] == 'p' && p[n - 1] == 'y';
}

/* read(2) of a regular file, other than the standard streams, made here:
 * what the supervisor does with it is let it run. Charged to the clock as
 * a trapped call is; not a scheduling point. */
static long fast_read(long *f) {
    long fd = f[1];
    if (fd <= 2 || !SLOT(STAT_ON)) return FALLBACK;
    u64 now = SLOT(MONO) + SLOT(COST);
    if (now >= SLOT(LIMIT)) return FALLBACK;
    unsigned char st[144];
    if (shim_raw(NR_FSTAT, fd, (long)st, 0, 0, 0, 0) != 0) return FALLBACK;
    if ((rd32(st + 24) & 0170000) != 0100000) return FALLBACK;
    f[0] = shim_raw(NR_READ, fd, f[2], f[3], 0, 0, 0);
    SLOT(MONO) = now;
    SLOT(READ_CALLS) += 1;
    return DONE;
}

__attribute__((used)) long shim_stat(long *f) {
    long nr = f[0];
    if (nr == NR_READ) return fast_read(f);
    unsigned char *buf;
    const char *path;
    int statx = 0;
    switch (nr) {
    case NR_STAT:
    case NR_LSTAT:
        path = (const char *)f[1];
        buf = (unsigned char *)f[2];
        break;
    case NR_FSTAT:
        path = 0;
        buf = (unsigned char *)f[2];
        break;
    case NR_NEWFSTATAT:
        path = (const char *)f[2];
        buf = (unsigned char *)f[3];
        break;
    case NR_STATX:
        path = (const char *)f[2];
        buf = (unsigned char *)f[5];
        statx = 1;
        break;
    default:
        return FALLBACK;
    }
    if (!SLOT(STAT_ON)) return FALLBACK;
    u64 now = SLOT(MONO) + SLOT(COST);
    if (now >= SLOT(LIMIT)) return FALLBACK;
    long r = shim_raw(nr, f[1], f[2], f[3], f[4], f[5], f[6]);
    if (r != 0) {
        /* An error is the kernel's answer, passed on as it is. */
        SLOT(MONO) = now;
        SLOT(STAT_CALLS) += 1;
        f[0] = r;
        return DONE;
    }
    /* The standard streams are where detrun puts a branch's captured
     * output (a file other than the one a run from scratch has): their
     * metadata is always the supervisor's to answer, in every run alike. */
    long fd = -1;
    if (nr == NR_FSTAT)
        fd = f[1];
    else if (nr != NR_STAT && nr != NR_LSTAT && (!path || path[0] == 0) &&
             ((nr == NR_NEWFSTATAT ? f[4] : f[3]) & AT_EMPTY_PATH))
        fd = f[1];
    if (fd >= 0 && fd <= 2) goto quiet;
    u64 dev, ino, m, c, b = 0;
    u64 start = SLOT(REAL_START);
    if (statx) {
        dev = (u64)rd32(buf + 136) << 32 | rd32(buf + 140);
        ino = rd64(buf + 32);
        m = rd64(buf + 112) * 1000000000UL + rd32(buf + 120);
        c = rd64(buf + 96) * 1000000000UL + rd32(buf + 104);
        b = rd64(buf + 80) * 1000000000UL + rd32(buf + 88);
    } else {
        u64 d = rd64(buf);
        /* glibc's (and the libc crate's) major() and minor(). */
        u64 major = ((d >> 8) & 0xfff) | ((d >> 32) & 0xfffff000UL);
        u64 minor = (d & 0xff) | ((d >> 12) & 0xffffff00UL);
        dev = major << 32 | minor;
        ino = rd64(buf + 8);
        m = rd64(buf + 88) * 1000000000UL + rd64(buf + 96);
        c = rd64(buf + 104) * 1000000000UL + rd64(buf + 112);
    }
    /* Times set during the run: the supervisor's table of first sightings. */
    if (m >= start || c >= start || b >= start) goto quiet;
    int real = SLOT(PY_REAL) && ends_with_py(path);
    u64 vdev = vdev_of(dev);
    if (!vdev) goto quiet;
    long i = find(dev, ino);
    if (i < 0) goto quiet;
    volatile u64 *e = TABLE + 3 * i;
    if (e[2] == 0) {
        e[0] = dev;
        e[1] = ino;
        e[2] = SLOT(INO_NEXT);
        SLOT(INO_NEXT) += 1;
        SLOT(INO_COUNT) += 1;
    }
    u64 vino = e[2];
    u64 pre = SLOT(PREEXISTING);
    if (!real) m = c = b = pre;
    if (statx) {
        wr64(buf + 32, vino);
        wr32(buf + 136, 0);
        wr32(buf + 140, (u32)vdev);
        wr64(buf + 144, 0); /* mount id */
        put_statx_ts(buf + 64, m);
        put_statx_ts(buf + 80, b);
        put_statx_ts(buf + 96, c);
        put_statx_ts(buf + 112, m);
    } else {
        wr64(buf, vdev);
        wr64(buf + 8, vino);
        put_stat_ts(buf + 72, m);
        put_stat_ts(buf + 88, m);
        put_stat_ts(buf + 104, c);
    }
    SLOT(MONO) = now;
    SLOT(STAT_CALLS) += 1;
    f[0] = 0;
    return DONE;
quiet:
    SLOT(MONO) = now;
    return QUIET;
}
