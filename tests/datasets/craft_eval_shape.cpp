// craft_eval_shape FILE HEIGHT WIDTH: gives the eval split of a prepared image file samples of
// HEIGHT x WIDTH, attributes to match, so the one defect left is a sample shape that differs from
// the training samples'. A helper of tests/cli/crafted_data.sh (no h5py on the machine).
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "h5_craft.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: craft_eval_shape FILE HEIGHT WIDTH\n");
    return 2;
  }
  try {
    mlpd::craft::give_eval_samples_shape(argv[1], std::strtoull(argv[2], nullptr, 10), std::strtoull(argv[3], nullptr, 10));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "craft_eval_shape: %s\n", e.what());
    return 1;
  }
  return 0;
}
