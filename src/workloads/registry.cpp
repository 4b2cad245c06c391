#include "core/check.h"
#include "workloads/workload.h"

namespace mlpd {

extern const std::string kResnetMiniDefaults;
extern const std::string kResnetReferenceDefaults;
std::unique_ptr<Workload> make_resnet_workload(const std::string& scale, const nlohmann::json& cfg,
                                               const WorkloadContext& ctx);
extern const std::string kNcfMiniDefaults;
extern const std::string kNcfReferenceDefaults;
std::unique_ptr<Workload> make_ncf_workload(const std::string& scale, const nlohmann::json& cfg,
                                            const WorkloadContext& ctx);

namespace {
void check_scale(const std::string& scale) {
  if (scale != "mini" && scale != "reference")
    throw UserError("unknown scale '" + scale + "': use mini or reference", 2);
}
}  // namespace

const std::string& workload_defaults_yaml(const std::string& benchmark, const std::string& scale) {
  check_scale(scale);
  if (benchmark == "resnet") return scale == "mini" ? kResnetMiniDefaults : kResnetReferenceDefaults;
  if (benchmark == "ncf") return scale == "mini" ? kNcfMiniDefaults : kNcfReferenceDefaults;
  throw UserError("unknown or not yet implemented benchmark '" + benchmark + "' (available: resnet, ncf)", 2);
}

std::unique_ptr<Workload> make_workload(const std::string& benchmark, const std::string& scale,
                                        const nlohmann::json& config, const WorkloadContext& ctx) {
  check_scale(scale);
  if (benchmark == "resnet") return make_resnet_workload(scale, config, ctx);
  if (benchmark == "ncf") return make_ncf_workload(scale, config, ctx);
  throw UserError("unknown or not yet implemented benchmark '" + benchmark + "' (available: resnet, ncf)", 2);
}

std::string workload_data_path(const std::string& data_dir, const std::string& benchmark, const std::string& scale) {
  return data_dir + "/" + benchmark + "_" + scale + ".h5";
}

}  // namespace mlpd
