#include "core/precision.h"

#include "core/check.h"

namespace mlpd {

Precision parse_compute_precision(const std::string& s) {
  if (s == "fp32") return Precision::fp32;
  if (s == "bf16") return Precision::bf16;
  throw UserError("unknown --precision '" + s + "' (expected fp32 or bf16)");
}

const char* compute_precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

}  // namespace mlpd
