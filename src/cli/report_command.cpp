#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "results/report_html.h"
#include "results/report_model.h"
#include "results/report_text.h"
#include "workloads/registry.h"

namespace mlpd::cli {

void add_report_command(CLI::App& app, ReportArgs& a) {
  auto* c = app.add_subcommand(
      "report",
      "Summarize a results folder: per benchmark its score (olympic mean of time to train), every run, its quality "
      "curve, throughput, communication share and, across rank counts, scaling; and every scaling study (scale.json "
      "from `mlperf-dist scale`) under it");
  c->footer(
      "DIR may be a results root (DIR/<system>/<benchmark>/result_N.txt), one system's folder or one benchmark's "
      "folder. Every log is checked as `check` does; a failed log is shown, never counted. Every scale.json under DIR\n"
      "(at any depth; DIR may be a `scale` output folder or a scale.json) adds a scaling study: its table per rank\n"
      "count, efficiency, the step's split and the model's prediction.\n"
      "Examples:\n"
      "  mlperf-dist report results/ -o report.html     # one self-contained page (tables, SVG plots)\n"
      "  mlperf-dist report results/                    # markdown summary on stdout\n"
      "  mlperf-dist report results/ --format csv -o summary.csv\n"
      "Exit codes: 0 written; 2 usage error, DIR holds neither a result_N.txt nor a scale.json, or a scale.json is\n"
      "malformed; 1 the output could not be written, or an internal error.");
  c->add_option("dir", a.dir, "The results folder (or a scale output folder)")->required();
  c->add_option("-o,--output", a.output, "Write here (atomically) instead of stdout");
  c->add_option("--format,-f", a.format, "html, md, csv or json (default: html with -o, else md)")
      ->check(CLI::IsMember({"html", "md", "csv", "json"}));
}

int run_report_command(const ReportArgs& a) {
  const std::string format = !a.format.empty() ? a.format : (a.output.empty() ? "md" : "html");
  const Report report = make_report(a.dir, &find_benchmark_spec);
  std::string text;
  if (format == "html")
    text = render_html(report);
  else if (format == "md")
    text = render_markdown(report);
  else if (format == "csv")
    text = render_csv(report);
  else
    text = render_json(report);
  if (a.output.empty()) {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      throw UserError("report: writing to stdout failed", kExitInternal);
    return kExitSuccess;
  }
  write_file_atomically(a.output, text.data(), text.size());
  size_t runs = 0;
  for (const BenchmarkReport& b : report.benchmarks) runs += b.runs.size();
  std::fprintf(stderr, "report: %zu benchmark folder(s), %zu run(s), %zu scaling study(ies) -> %s\n",
               report.benchmarks.size(), runs, report.studies.size(), a.output.c_str());
  return kExitSuccess;
}

}  // namespace mlpd::cli
