// A request to stop the run early and cleanly: SIGUSR1 (what `sbatch --signal=B:USR1@T` sends and
// mpirun forwards to every rank) or SIGTERM reaching a rank. The handler only sets a flag; ranks
// agree on it in the next step's allreduce (train_one_step), so every rank stops after the same
// step, writes its checkpoint (with --checkpoint-dir) and the run ends with status aborted.
#pragma once

namespace mlpd {

void install_stop_signal_handlers();
bool stop_signal_received();
// Test hook: as if a signal had arrived.
void request_stop_for_test();

}  // namespace mlpd
