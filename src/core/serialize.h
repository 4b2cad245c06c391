// Records sent between ranks (evaluation records, game records) and checkpoints are
// Boost.Serialization binary archives: a struct with a `serialize(Archive&, unsigned)` member
// becomes bytes on one rank and the same struct on another. Binary archives are not portable
// across architectures; every rank of a run is the same binary on the same kind of machine.
#pragma once
#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>
#include <sstream>
#include <string>

#include "core/check.h"

namespace mlpd {

template <class T>
std::string to_bytes(const T& value) {
  std::ostringstream out(std::ios::binary);
  {
    boost::archive::binary_oarchive ar(out, boost::archive::no_header);
    ar << value;
  }
  return std::move(out).str();
}

// Throws UserError when the bytes are not a T written by to_bytes (truncated or corrupt).
template <class T>
T from_bytes(const std::string& bytes) {
  T value{};
  try {
    std::istringstream in(bytes, std::ios::binary);
    boost::archive::binary_iarchive ar(in, boost::archive::no_header);
    ar >> value;
  } catch (const std::exception& e) {
    throw UserError(std::string("corrupt serialized record: ") + e.what());
  }
  return value;
}

}  // namespace mlpd
