#pragma once
// SIGINT / SIGTERM during a run: the first signal sets a flag that run_experiment polls
// (RunOptions::stop): no new item starts, those in flight finish and the journal keeps them.
// A second signal kills at once (SA_RESETHAND); the journal stays consistent (journal.hpp).
#include <atomic>

namespace favor {

// Installs the handlers for SIGINT and SIGTERM (the flag and the signal cleared) and returns
// the flag they set; restore_stop_handlers puts back the handlers they replaced (an embedding
// process's own, e.g. Python's KeyboardInterrupt). Calls pair up and may overlap (runs in
// several threads): only the first install replaces the handlers (later ones share its flag)
// and only the last restore puts them back.
const std::atomic<bool>& install_stop_handlers();
void restore_stop_handlers();
// The signal that set the flag (SIGINT or SIGTERM), 0 while none came.
int stop_signal();

}  // namespace favor
