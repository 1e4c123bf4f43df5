// storebus-testkit-restrict-families FAMILIES COMMAND [ARGUMENT...]
//
// Runs COMMAND with socket(2) refused (EAFNOSUPPORT) for every address family but those in
// FAMILIES, a space- or comma-separated list such as "AF_UNIX AF_INET AF_INET6": what systemd's
// RestrictAddressFamilies= does to a service, with a seccomp filter of the same kind. The tests of
// deploy/systemd start each service through it with its unit's list, so that a family the service
// needs and the unit leaves out fails the test here rather than the service under systemd.
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "storebus-testkit-restrict-families knows the seccomp architecture of x86_64 and aarch64 only"
#endif

#define MAX_FAMILIES 16

static int family_number(const char *name) {
    static const struct { const char *name; int number; } known[] = {
        {"AF_UNIX", AF_UNIX}, {"AF_INET", AF_INET}, {"AF_INET6", AF_INET6},
        {"AF_NETLINK", AF_NETLINK}, {"AF_PACKET", AF_PACKET},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(known[i].name, name) == 0) return known[i].number;
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s FAMILIES COMMAND [ARGUMENT...]\n", argv[0]);
        return 64;
    }
    int families[MAX_FAMILIES];
    int count = 0;
    char *list = strdup(argv[1]);
    for (char *name = strtok(list, " ,"); name != NULL; name = strtok(NULL, " ,")) {
        int number = family_number(name);
        if (number < 0 || count == MAX_FAMILIES) {
            fprintf(stderr, "%s: unknown address family %s (or too many)\n", argv[0], name);
            return 64;
        }
        families[count++] = number;
    }

    // Another architecture's system calls are refused whole (systemd's SystemCallArchitectures=native
    // does the same). socket(2) with a family outside the list fails with EAFNOSUPPORT.
    struct sock_filter filter[8 + MAX_FAMILIES];
    size_t n = 0;
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, (unsigned char)(count + 2));
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
    for (int i = 0; i < count; i++) {
        // A listed family jumps over the remaining checks and the refusal, to the ALLOW.
        filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)families[i], (unsigned char)(count - i), 0);
    }
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAFNOSUPPORT);
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog program = {.len = (unsigned short)n, .filter = filter};

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("storebus-testkit-restrict-families: seccomp");
        return 70;
    }
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    return 127;
}
