#include "workloads/step_loss.h"

#include <vector>

#include "core/check.h"
#include "kernels/device.h"

namespace mlpd {

StepLoss make_step_loss(Device d, int terms, int terms_per_group) {
  MLPD_CHECK(terms > 0 && terms_per_group > 0 && terms % terms_per_group == 0, "step loss: bad term counts");
  StepLoss l;
  l.device = d;
  l.memory = alloc_on(d, sizeof(double) * static_cast<size_t>(terms));
  l.terms = terms;
  l.terms_per_group = terms_per_group;
  return l;
}

double* begin_step_loss(StepLoss& l) {
  zero_on(l.device, l.memory.get(), sizeof(double) * static_cast<size_t>(l.terms));
  return reinterpret_cast<double*>(l.memory.get());
}

double read_step_loss(const StepLoss& l) {
  std::vector<double> host(static_cast<size_t>(l.terms));
  copy_to_host(l.device, host.data(), l.memory.get(), sizeof(double) * host.size());
  double sum = 0.0;
  for (size_t g = 0; g < host.size(); g += static_cast<size_t>(l.terms_per_group)) {
    double group = host[g];
    for (size_t k = 1; k < static_cast<size_t>(l.terms_per_group); ++k) group += host[g + k];
    sum += group;
  }
  return sum;
}

}  // namespace mlpd
