// `score`: quality metrics of a system's output against references, one subcommand per metric:
// `score bleu` (sacreBLEU's corpus BLEU) and `score coco` (pycocotools' twelve COCO numbers). The
// same code scores the workloads' evaluations.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/check.h"
#include "core/atomic_file.h"
#include "core/read_file.h"
#include "detection/coco_eval.h"
#include "detection/coco_json.h"
#include "translation/bleu.h"

namespace mlpd::cli {

void add_score_command(CLI::App& app, ScoreArgs& a) {
  auto* s = app.add_subcommand("score", "Score a system's output against references (metrics: bleu, coco)");
  s->require_subcommand(0, 1);  // none: run_score_command names the metrics (CLI11 would not)
  s->footer(kExitCodesHelp);
  auto* b = s->add_subcommand(
      "bleu", "Corpus BLEU as sacreBLEU computes it (defaults: tokenizer 13a, mixed case, exp smoothing)");
  b->footer(
      "Both files: UTF-8, one sentence per line, the same number of lines (line i of --hyp is scored\n"
      "against line i of --ref). Prints sacreBLEU's line (Python's str(BLEUScore), i.e. `sacrebleu REF -i HYP\n"
      "-f text -w 2` without the signature):\n"
      "  BLEU = 27.31 60.1/33.4/20.6/13.0 (BP = 0.982 ratio = 0.982 hyp_len = 1234 ref_len = 1256)\n"
      "Exit codes: 0 scored; 2 usage error (a missing file, unequal line counts, invalid UTF-8: the message\n"
      "names the file and line); 1 internal error.");
  b->add_option("--ref,-r", a.ref, "Reference translations, one per line")->required()->check(CLI::ExistingFile);
  b->add_option("--hyp,-i", a.hyp, "System output (detokenized), one per line")->required()->check(CLI::ExistingFile);
  b->add_option("--tokenize,-t", a.tokenize, "Tokenizer: 13a (mteval-v13a, sacreBLEU's default) or none")
      ->check(CLI::IsMember({"13a", "none"}))
      ->capture_default_str();
  b->add_flag("--lowercase,-l", a.lowercase, "Case-insensitive BLEU (both sides lowercased)");
  b->add_option("--width,-w", a.width, "Decimals of the score (sacreBLEU's --width; its Python str() uses 2)")
      ->check(CLI::Range(0, 10))
      ->capture_default_str();
  b->callback([&a] { a.metric = "bleu"; });
  auto* c = s->add_subcommand("coco", "COCO detection metrics as pycocotools' COCOeval computes and prints them");
  c->footer(
      "--gt: a COCO instances file (images, categories, annotations with bbox, area, iscrowd and, for segm,\n"
      "a segmentation as polygons or RLE). --dt: a results list [{image_id, category_id, bbox [x,y,w,h], score\n"
      "[, segmentation RLE]}], as pycocotools' loadRes reads it. Prints the twelve lines of summarize().\n"
      "Exit codes: 0 scored; 2 usage error (a missing or malformed file: the message names the entry and\n"
      "field); 1 internal error.");
  c->add_option("--gt", a.gt, "Ground truth: COCO instances JSON")->required()->check(CLI::ExistingFile);
  c->add_option("--dt", a.dt, "Detections: COCO results JSON")->required()->check(CLI::ExistingFile);
  c->add_option("--iou-type", a.iou_type, "bbox (boxes) or segm (masks)")
      ->check(CLI::IsMember({"bbox", "segm"}))
      ->capture_default_str();
  c->add_option("--json", a.json_out, "Also write the twelve numbers as JSON to this file");
  c->callback([&a] { a.metric = "coco"; });
}

namespace {

// The lines of a UTF-8 text file as sacreBLEU reads them: split at "\n" only (a "\r" stays and is
// stripped as trailing whitespace), no empty last line after a final newline.
std::vector<std::string> read_utf8_lines(const std::string& path, const char* what) {
  const std::string text = read_whole_file(path, what, kExitUsage);
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.emplace_back(text, pos, nl - pos);
    pos = nl + 1;
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    size_t bad = 0;
    if (!is_valid_utf8(lines[i], &bad)) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(lines[i][bad]));
      throw UserError(std::string(what) + " " + path + " line " + std::to_string(i + 1) + ": invalid UTF-8 (byte " +
                          byte + " at byte " + std::to_string(bad + 1) + " of the line)",
                      kExitUsage);
    }
  }
  return lines;
}

int run_score_bleu(const ScoreArgs& a) {
  const std::vector<std::string> refs = read_utf8_lines(a.ref, "--ref");
  const std::vector<std::string> hyps = read_utf8_lines(a.hyp, "--hyp");
  if (refs.size() != hyps.size())
    throw UserError("--hyp " + a.hyp + " has " + std::to_string(hyps.size()) + " lines but --ref " + a.ref + " has " +
                        std::to_string(refs.size()) + " (one sentence per line, line i against line i)",
                    kExitUsage);
  BleuOptions opts;
  opts.tokenize = *parse_bleu_tokenizer(a.tokenize);  // validated by the option's check
  opts.lowercase = a.lowercase;
  std::printf("%s\n", format_sacrebleu(corpus_bleu(hyps, refs, opts), a.width).c_str());
  return kExitSuccess;
}

nlohmann::json read_json_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError(std::string(what) + " " + path + ": cannot be opened", kExitUsage);
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(std::string(what) + " " + path + ": not valid JSON (" + e.what() + ")", kExitUsage);
  }
}

int run_score_coco(const ScoreArgs& a) {
  const CocoIouType type = a.iou_type == "segm" ? CocoIouType::Segm : CocoIouType::Bbox;
  const nlohmann::json gt_json = read_json_file(a.gt, "--gt");
  const nlohmann::json dt_json = read_json_file(a.dt, "--dt");
  CocoGroundTruth gt;
  std::vector<CocoDetection> dts;
  try {
    gt = coco_read_ground_truth(gt_json, type == CocoIouType::Segm);
  } catch (const std::invalid_argument& e) {
    throw UserError("--gt " + a.gt + ": " + e.what(), kExitUsage);
  }
  try {
    dts = coco_read_detections(dt_json, gt, type);
  } catch (const std::invalid_argument& e) {
    throw UserError("--dt " + a.dt + ": " + e.what(), kExitUsage);
  }
  const CocoStats s = coco_evaluate(gt, dts, type);
  std::fputs(coco_summary_text(s).c_str(), stdout);
  if (!a.json_out.empty()) {
    static const char* names[12] = {"AP", "AP50", "AP75", "APs", "APm", "APl",
                                    "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};
    nlohmann::json j;
    j["iou_type"] = a.iou_type;
    for (int i = 0; i < 12; ++i) j[names[i]] = s.stats[size_t(i)];
    const std::string text = j.dump(2) + "\n";
    write_file_atomically(a.json_out, text.data(), text.size());
  }
  return kExitSuccess;
}

}  // namespace

int run_score_command(const ScoreArgs& a) {
  if (a.metric == "bleu") return run_score_bleu(a);
  if (a.metric == "coco") return run_score_coco(a);
  throw UserError("score: name a metric, e.g. `mlperf-dist score bleu --ref REF --hyp HYP` (available: bleu, coco)",
                  kExitUsage);
}

}  // namespace mlpd::cli
