// The stop flag of a run and the handlers that set it (stop_signals.hpp). The handler only
// stores: a lock-free atomic and a sig_atomic_t, both safe in a signal handler.
#include "favor/stop_signals.hpp"

#include <signal.h>

#include <csignal>

namespace favor {
namespace {

std::atomic<bool> g_stop{false};
volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_old_int {}, g_old_term {};
bool g_installed = false;

extern "C" void on_stop_signal(int sig) {
    g_signal = sig;
    g_stop.store(true);
}

}  // namespace

const std::atomic<bool>& install_stop_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    g_stop.store(false);
    g_signal = 0;
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_installed = true;
    return g_stop;
}

void restore_stop_handlers() {
    if (!g_installed) return;
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
    g_installed = false;
}

int stop_signal() { return int(g_signal); }

}  // namespace favor
