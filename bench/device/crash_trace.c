// A crash reporter for the GPU machine, which has no gdb: preloaded into a process
// (LD_PRELOAD=crash_trace.so), it prints the crashing thread's native backtrace to stderr on SIGSEGV,
// SIGBUS, SIGILL, SIGFPE or SIGABRT, then lets the signal kill the process as it would have.
// Frames print as "library(symbol+offset)" or "library(+offset)"; `addr2line -e library offset`
// names the source line where the library has debug information.
// Build: gcc -shared -fPIC -O1 -o crash_trace.so bench/device/crash_trace.c
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void report(int sig, siginfo_t* info, void* context) {
  (void)context;
  char name[32] = {0};
  prctl(PR_GET_NAME, name, 0, 0, 0);
  char line[256];
  const int n = snprintf(line, sizeof line, "\n*** crash_trace: %s at address %p in thread %d (%s)\n", strsignal(sig),
                         info ? info->si_addr : NULL, (int)gettid(), name);
  if (n > 0) (void)!write(STDERR_FILENO, line, (size_t)n);
  void* frames[64];
  const int depth = backtrace(frames, 64);
  backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  void* warm[2];
  backtrace(warm, 2);  // loads libgcc_s now: the handler must not load a library mid-crash
  static char alternate_stack[1 << 16];  // a stack overflow still gets its report (main thread)
  stack_t ss = {.ss_sp = alternate_stack, .ss_size = sizeof alternate_stack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = report;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (size_t i = 0; i < sizeof signals / sizeof signals[0]; ++i) sigaction(signals[i], &sa, NULL);
}
