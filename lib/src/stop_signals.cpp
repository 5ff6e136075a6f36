// The stop flag of a run and the handlers that set it (stop_signals.hpp). The handler only
// stores: a lock-free atomic and a sig_atomic_t, both safe in a signal handler.
#include "favor/stop_signals.hpp"

#include <signal.h>

#include <csignal>

namespace favor {
namespace {

std::atomic<bool> g_stop{false};
volatile std::sig_atomic_t g_signal = 0;

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
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return g_stop;
}

int stop_signal() { return int(g_signal); }

}  // namespace favor
