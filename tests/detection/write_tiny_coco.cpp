// write_tiny_coco DIR: writes tests/detection/tiny_coco.h's set into DIR, with the val annotation,
// for tests/cli/maskrcnn_reference_step.sh.
#include <cstdio>
#include <exception>

#include "tiny_coco.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_tiny_coco DIR\n");
    return 2;
  }
  try {
    mlpd::test::write_tiny_coco(argv[1], true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "write_tiny_coco: %s\n", e.what());
    return 1;
  }
  return 0;
}
