// The stop handlers of a run (stop_signals.hpp): overlapping runs (Python threads) put back
// the handler they found, whatever order they finish in.
#include <signal.h>

#include <catch2/catch.hpp>

#include "favor/core/stop_signals.hpp"

namespace {
extern "C" void embedder_handler(int) {}

// The SIGINT handler now installed.
void (*current_sigint())(int) {
    struct sigaction now {};
    sigaction(SIGINT, nullptr, &now);
    return now.sa_handler;
}
}  // namespace

TEST_CASE("overlapping runs restore the embedder's SIGINT handler", "[stop_signals]") {
    struct sigaction mine {}, before {};
    mine.sa_handler = embedder_handler;
    sigemptyset(&mine.sa_mask);
    sigaction(SIGINT, &mine, &before);
    const std::atomic<bool>& a = favor::install_stop_handlers();   // run A starts
    const auto favors = current_sigint();
    CHECK(favors != embedder_handler);
    const std::atomic<bool>& b = favor::install_stop_handlers();   // run B starts while A runs
    CHECK(&a == &b);
    favor::restore_stop_handlers();   // A ends first: B still needs the handler
    CHECK(current_sigint() == favors);
    favor::restore_stop_handlers();   // B ends: the embedder's own handler is back
    CHECK(current_sigint() == embedder_handler);
    favor::restore_stop_handlers();   // an extra restore changes nothing
    CHECK(current_sigint() == embedder_handler);
    sigaction(SIGINT, &before, nullptr);
}
