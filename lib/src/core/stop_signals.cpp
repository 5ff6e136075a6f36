// The stop flag of a run and the handlers that set it (stop_signals.hpp). The handler only
// stores: a lock-free atomic and a sig_atomic_t, both safe in a signal handler.
#include "favor/core/stop_signals.hpp"

#include <signal.h>

#include <csignal>
#include <mutex>

namespace favor {
namespace {

std::atomic<bool> g_stop{false};
volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_old_int {}, g_old_term {};
// Runs holding the handlers (several Python threads may run at once): the first installs them
// and saves the handlers it replaced, the last restores those. A second install must not save
// favor's own handler as "the old one" (it was then left in place, Ctrl-C dead for the
// embedding Python session).
int g_holders = 0;
std::mutex g_mutex;

extern "C" void on_stop_signal(int sig) {
    g_signal = sig;
    g_stop.store(true);
}

}  // namespace

const std::atomic<bool>& install_stop_handlers() {
    const std::lock_guard<std::mutex> lock(g_mutex);
    if (g_holders++ > 0) return g_stop;   // installed by a run still going: share its flag
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    g_stop.store(false);
    g_signal = 0;
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    return g_stop;
}

void restore_stop_handlers() {
    const std::lock_guard<std::mutex> lock(g_mutex);
    if (g_holders == 0 || --g_holders > 0) return;
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
}

int stop_signal() { return int(g_signal); }

}  // namespace favor
