#include "detection/coco_eval.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <utility>

namespace mlpd {

namespace {

constexpr int kT = 10, kR = 101, kA = 4, kM = 3;
constexpr int kMaxDets[kM] = {1, 10, 100};
constexpr double kAreaLo[kA] = {0.0, 0.0, 32.0 * 32.0, 96.0 * 96.0};
constexpr double kAreaHi[kA] = {1e5 * 1e5, 32.0 * 32.0, 96.0 * 96.0, 1e5 * 1e5};

// np.linspace(start, stop, num): i * step + start, the last one exactly stop.
std::array<double, kT> iou_thresholds() {
  std::array<double, kT> t{};
  const double step = (0.95 - 0.5) / (kT - 1);
  for (int i = 0; i < kT; ++i) t[size_t(i)] = double(i) * step + 0.5;
  t[kT - 1] = 0.95;
  return t;
}
std::array<double, kR> recall_thresholds() {
  std::array<double, kR> r{};
  const double step = 1.0 / (kR - 1);
  for (int i = 0; i < kR; ++i) r[size_t(i)] = double(i) * step;
  r[kR - 1] = 1.0;
  return r;
}

// maskUtils.iou on boxes: intersection over union, or over the detection's area for a crowd gt.
double box_iou(const double* d, const double* g, bool crowd) {
  const double iw = std::min(d[0] + d[2], g[0] + g[2]) - std::max(d[0], g[0]);
  if (iw <= 0) return 0.0;
  const double ih = std::min(d[1] + d[3], g[1] + g[3]) - std::max(d[1], g[1]);
  if (ih <= 0) return 0.0;
  const double inter = iw * ih;
  const double u = crowd ? d[2] * d[3] : d[2] * d[3] + g[2] * g[3] - inter;
  return inter / u;
}

// Indices of v sorted by key, stable (numpy's mergesort).
template <class Key>
std::vector<size_t> stable_order(size_t n, Key key) {
  std::vector<size_t> o(n);
  std::iota(o.begin(), o.end(), size_t{0});
  std::stable_sort(o.begin(), o.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  return o;
}

// evaluateImg's result for one (image, category, area range) at maxDets 100.
struct ImageEval {
  bool present = false;
  std::vector<double> dt_scores;             // [D], by score
  std::vector<uint8_t> dt_matched;           // [T*D]
  std::vector<uint8_t> dt_ignore;            // [T*D]
  std::vector<uint8_t> gt_ignore;            // [G]
  size_t d = 0;
};

struct Cell {
  std::vector<const CocoAnnotation*> gts;
  std::vector<const CocoDetection*> dts;
};

}  // namespace

CocoStats coco_evaluate(const CocoGroundTruth& gt, const std::vector<CocoDetection>& dts, CocoIouType type) {
  const auto T = iou_thresholds();
  const auto R = recall_thresholds();
  std::set<int64_t> image_set;
  for (const CocoImage& im : gt.images) image_set.insert(im.id);
  const std::vector<int64_t> images(image_set.begin(), image_set.end());
  const std::set<int32_t> cat_set(gt.category_ids.begin(), gt.category_ids.end());
  const std::vector<int32_t> cats(cat_set.begin(), cat_set.end());
  const bool segm = type == CocoIouType::Segm;
  for (size_t i = 0; i < dts.size(); ++i) {
    if (!image_set.count(dts[i].image_id))
      throw std::invalid_argument("detection " + std::to_string(i) + " is on image " +
                                  std::to_string(dts[i].image_id) + ", which the ground truth does not have");
    if (segm && !dts[i].has_mask)
      throw std::invalid_argument("detection " + std::to_string(i) + " has no mask for a segm evaluation");
  }
  // Ground truth and detections per (image, category), in input order.
  std::map<std::pair<int64_t, int32_t>, Cell> cells;
  for (const CocoAnnotation& a : gt.annotations) {
    if (!image_set.count(a.image_id) || !cat_set.count(a.category_id)) continue;
    if (segm && !a.has_mask) throw std::invalid_argument("ground truth " + std::to_string(a.id) + " has no mask");
    cells[{a.image_id, a.category_id}].gts.push_back(&a);
  }
  std::vector<int64_t> dt_id(dts.size());  // loadRes numbers results from 1
  for (size_t i = 0; i < dts.size(); ++i) {
    dt_id[i] = int64_t(i) + 1;
    if (cat_set.count(dts[i].category_id)) cells[{dts[i].image_id, dts[i].category_id}].dts.push_back(&dts[i]);
  }
  auto dt_area = [&](const CocoDetection& d) {
    return segm ? double(rle_area(d.mask)) : d.bbox[2] * d.bbox[3];
  };
  const size_t K = cats.size(), I = images.size();
  // evalImgs[k][a][i]
  std::vector<ImageEval> evals(K * kA * I);
  const int max_det = kMaxDets[kM - 1];
  for (size_t k = 0; k < K; ++k)
    for (size_t i = 0; i < I; ++i) {
      auto it = cells.find({images[i], cats[k]});
      if (it == cells.end()) continue;
      const Cell& c = it->second;
      if (c.gts.empty() && c.dts.empty()) continue;
      // computeIoU: detections by score (stable), at most maxDets[-1]; gts in input order.
      const auto dorder = stable_order(c.dts.size(), [&](size_t j) { return -c.dts[j]->score; });
      const size_t D = std::min(dorder.size(), size_t(max_det));
      const size_t G = c.gts.size();
      std::vector<double> ious(D * G);
      for (size_t di = 0; di < D; ++di)
        for (size_t g = 0; g < G; ++g) {
          const CocoDetection& d = *c.dts[dorder[di]];
          const CocoAnnotation& a = *c.gts[g];
          ious[di * G + g] = segm ? rle_iou(d.mask, a.mask, a.iscrowd) : box_iou(d.bbox, a.bbox, a.iscrowd);
        }
      for (int ar = 0; ar < kA; ++ar) {
        ImageEval& e = evals[(k * kA + size_t(ar)) * I + i];
        e.present = true;
        // pycocotools sets ignore = iscrowd; then also ignores gts outside the area range.
        std::vector<uint8_t> g_ign(G);
        for (size_t g = 0; g < G; ++g) {
          const CocoAnnotation& a = *c.gts[g];
          g_ign[g] = (a.iscrowd || a.area < kAreaLo[ar] || a.area > kAreaHi[ar]) ? 1 : 0;
        }
        const auto gorder = stable_order(G, [&](size_t g) { return g_ign[g]; });
        e.d = D;
        e.gt_ignore.resize(G);
        for (size_t g = 0; g < G; ++g) e.gt_ignore[g] = g_ign[gorder[g]];
        e.dt_scores.resize(D);
        for (size_t di = 0; di < D; ++di) e.dt_scores[di] = c.dts[dorder[di]]->score;
        std::vector<int64_t> gtm(size_t(kT) * G, 0), dtm(size_t(kT) * D, 0);
        e.dt_ignore.assign(size_t(kT) * D, 0);
        for (int t = 0; t < kT; ++t)
          for (size_t di = 0; di < D; ++di) {
            double best = std::min(T[size_t(t)], 1 - 1e-10);
            long m = -1;
            for (size_t g = 0; g < G; ++g) {
              const size_t og = gorder[g];
              if (gtm[size_t(t) * G + g] > 0 && !c.gts[og]->iscrowd) continue;
              if (m > -1 && e.gt_ignore[size_t(m)] == 0 && e.gt_ignore[g] == 1) break;
              const double v = ious[di * G + og];
              if (v < best) continue;
              best = v;
              m = long(g);
            }
            if (m == -1) continue;
            e.dt_ignore[size_t(t) * D + di] = e.gt_ignore[size_t(m)];
            dtm[size_t(t) * D + di] = c.gts[gorder[size_t(m)]]->id;
            gtm[size_t(t) * G + size_t(m)] = dt_id[size_t(c.dts[dorder[di]] - dts.data())];
          }
        e.dt_matched.resize(size_t(kT) * D);
        for (size_t di = 0; di < D; ++di) {
          const double area = dt_area(*c.dts[dorder[di]]);
          const bool out_of_range = area < kAreaLo[ar] || area > kAreaHi[ar];
          for (int t = 0; t < kT; ++t) {
            const size_t at = size_t(t) * D + di;
            e.dt_matched[at] = dtm[at] != 0 ? 1 : 0;
            if (dtm[at] == 0 && out_of_range) e.dt_ignore[at] = 1;
          }
        }
      }
    }
  // accumulate: precision [T,R,K,A,M] and recall [T,K,A,M], -1 where nothing is scored.
  std::vector<double> precision(size_t(kT) * kR * K * kA * kM, -1.0), recall(size_t(kT) * K * kA * kM, -1.0);
  auto pidx = [&](int t, int r, size_t k, int a, int m) {
    return (((size_t(t) * kR + size_t(r)) * K + k) * kA + size_t(a)) * kM + size_t(m);
  };
  auto ridx = [&](int t, size_t k, int a, int m) { return ((size_t(t) * K + k) * kA + size_t(a)) * kM + size_t(m); };
  const double spacing = DBL_EPSILON;  // np.spacing(1)
  for (size_t k = 0; k < K; ++k)
    for (int a = 0; a < kA; ++a)
      for (int m = 0; m < kM; ++m) {
        const size_t md = size_t(kMaxDets[m]);
        std::vector<const ImageEval*> E;
        for (size_t i = 0; i < I; ++i) {
          const ImageEval& e = evals[(k * kA + size_t(a)) * I + i];
          if (e.present) E.push_back(&e);
        }
        if (E.empty()) continue;
        std::vector<double> scores;
        std::vector<std::pair<const ImageEval*, size_t>> where;  // (image eval, detection index)
        size_t npig = 0;
        for (const ImageEval* e : E) {
          for (size_t di = 0; di < std::min(md, e->d); ++di) {
            scores.push_back(e->dt_scores[di]);
            where.push_back({e, di});
          }
          for (uint8_t g : e->gt_ignore) npig += g == 0 ? 1 : 0;
        }
        if (npig == 0) continue;
        const auto order = stable_order(scores.size(), [&](size_t j) { return -scores[j]; });
        const size_t nd = order.size();
        for (int t = 0; t < kT; ++t) {
          std::vector<double> rc(nd), pr(nd);
          double tp = 0, fp = 0;
          for (size_t j = 0; j < nd; ++j) {
            const auto [e, di] = where[order[j]];
            const size_t at = size_t(t) * e->d + di;
            const bool ign = e->dt_ignore[at] != 0, matched = e->dt_matched[at] != 0;
            if (matched && !ign) tp += 1;
            if (!matched && !ign) fp += 1;
            rc[j] = tp / double(npig);
            pr[j] = tp / (fp + tp + spacing);
          }
          recall[ridx(t, k, a, m)] = nd ? rc[nd - 1] : 0.0;
          for (size_t j = nd; j-- > 1;)
            if (pr[j] > pr[j - 1]) pr[j - 1] = pr[j];
          for (int r = 0; r < kR; ++r) {
            // np.searchsorted(rc, R, side='left'); pycocotools stops filling at the first index past
            // the end (an IndexError it catches), so the rest stay 0.
            const size_t pi = size_t(std::lower_bound(rc.begin(), rc.end(), R[size_t(r)]) - rc.begin());
            precision[pidx(t, r, k, a, m)] = pi < nd ? pr[pi] : 0.0;
          }
        }
      }
  // summarize
  auto mean_valid = [](const std::vector<double>& v) {
    double s = 0;
    size_t n = 0;
    for (double x : v)
      if (x > -1) {
        s += x;
        ++n;
      }
    return n ? s / double(n) : -1.0;
  };
  auto ap = [&](int t_only, int a, int m) {
    std::vector<double> v;
    for (int t = 0; t < kT; ++t) {
      if (t_only >= 0 && t != t_only) continue;
      for (int r = 0; r < kR; ++r)
        for (size_t k = 0; k < K; ++k) v.push_back(precision[pidx(t, r, k, a, m)]);
    }
    return mean_valid(v);
  };
  auto ar = [&](int a, int m) {
    std::vector<double> v;
    for (int t = 0; t < kT; ++t)
      for (size_t k = 0; k < K; ++k) v.push_back(recall[ridx(t, k, a, m)]);
    return mean_valid(v);
  };
  CocoStats s;
  s.stats = {ap(-1, 0, 2), ap(0, 0, 2), ap(5, 0, 2), ap(-1, 1, 2), ap(-1, 2, 2), ap(-1, 3, 2),
             ar(0, 0),     ar(0, 1),    ar(0, 2),    ar(1, 2),     ar(2, 2),     ar(3, 2)};
  return s;
}

std::string coco_summary_text(const CocoStats& s) {
  struct Line {
    bool ap;
    const char* iou;
    const char* area;
    int max_dets;
  };
  static const Line lines[12] = {{true, "0.50:0.95", "all", 100},   {true, "0.50", "all", 100},
                                 {true, "0.75", "all", 100},        {true, "0.50:0.95", "small", 100},
                                 {true, "0.50:0.95", "medium", 100}, {true, "0.50:0.95", "large", 100},
                                 {false, "0.50:0.95", "all", 1},    {false, "0.50:0.95", "all", 10},
                                 {false, "0.50:0.95", "all", 100},  {false, "0.50:0.95", "small", 100},
                                 {false, "0.50:0.95", "medium", 100}, {false, "0.50:0.95", "large", 100}};
  std::string out;
  char buf[160];
  for (int i = 0; i < 12; ++i) {
    const Line& l = lines[i];
    std::snprintf(buf, sizeof buf, " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                  l.ap ? "Average Precision" : "Average Recall", l.ap ? "(AP)" : "(AR)", l.iou, l.area, l.max_dets,
                  s.stats[size_t(i)]);
    out += buf;
  }
  return out;
}

}  // namespace mlpd
