// The bounded fuzz run that CI does: for every target, a seeded series of mutations of valid inputs
// (bit flips, random and "interesting" bytes and numbers inserted, ranges erased and duplicated,
// truncations, splices of two seeds). Each parser must return or throw ortfleet::Error. The same seed
// gives the same inputs, so a finding reproduces; ORTFLEET_FUZZ_ITERATIONS and ORTFLEET_FUZZ_SEED run
// it longer or elsewhere (the libFuzzer targets explore further: tests/fuzz/README.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "fuzz_targets.hpp"

namespace ortfleet::fuzz {
namespace {

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

/// splitmix64: small, fast, reproducible.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }

 private:
  uint64_t state_;
};

// Values at the edges of what the parsers convert: integer limits, huge and odd floats, JSON's other
// types, protobuf's longest varint.
const std::vector<std::string> kInteresting = {
    "-1", "0", "2147483648", "4294967296", "9223372036854775807", "-9223372036854775808", "18446744073709551615",
    "99999999999999999999999", "1e308", "-1e309", "1.5", "null", "true", "[]", "{}", "\"\"", "\"cuda:99999999999\"",
    "[[]]", std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10), std::string("\x00", 1), "\xc3\x28", "\n"};

std::string mutate(Random& random, const std::vector<std::string>& seeds) {
  std::string s = seeds[random.below(seeds.size())];
  const int rounds = 1 + static_cast<int>(random.below(4));
  for (int round = 0; round < rounds; ++round) {
    const size_t pos = random.below(s.size() + 1);
    switch (random.below(9)) {
      case 0:  // flip a bit
        if (!s.empty()) s[random.below(s.size())] ^= static_cast<char>(1u << random.below(8));
        break;
      case 1:  // set a byte
        if (!s.empty()) s[random.below(s.size())] = static_cast<char>(random.below(256));
        break;
      case 2: {  // insert random bytes
        std::string bytes(1 + random.below(8), '\0');
        for (char& c : bytes) c = static_cast<char>(random.below(256));
        s.insert(pos, bytes);
        break;
      }
      case 3:  // erase a range
        s.erase(pos, 1 + random.below(16));
        break;
      case 4:  // truncate
        s.resize(pos);
        break;
      case 5: {  // splice with another seed
        const std::string& other = seeds[random.below(seeds.size())];
        s = s.substr(0, pos) + other.substr(random.below(other.size() + 1));
        break;
      }
      case 6:  // insert an interesting value
        s.insert(pos, kInteresting[random.below(kInteresting.size())]);
        break;
      case 7: {  // replace a number with an interesting value
        const size_t digit = s.find_first_of("0123456789", pos);
        if (digit == std::string::npos) break;
        const size_t end = s.find_first_not_of("0123456789.-", digit);
        s.replace(digit, end == std::string::npos ? std::string::npos : end - digit, kInteresting[random.below(7)]);
        break;
      }
      case 8: {  // duplicate a range
        const std::string chunk = s.substr(pos, 1 + random.below(32));
        s.insert(random.below(s.size() + 1), chunk);
        break;
      }
    }
  }
  return s;
}

/// Findings in files this change could not fix (another change owns them), by target: the text of the
/// foreign exception they throw. Such a finding is the only foreign exception its target may throw, and
/// it must still occur: once fixed, the entry fails the test until it is removed.
const std::map<std::string, std::string> kKnownFindings = {};

class FuzzTarget : public ::testing::TestWithParam<const Target*> {};

TEST_P(FuzzTarget, MutatedInputsAreRefusedWithAnOrtfleetErrorOrAccepted) {
  const Target& t = *GetParam();
  const auto seeds = t.seeds();
  // A seed is valid input: it parses without even an ortfleet::Error, so mutations start deep in the parser.
  for (const auto& seed : seeds) ASSERT_NO_THROW(t.parse(seed)) << t.name << ": a seed fails";
  const uint64_t iterations = env_number("ORTFLEET_FUZZ_ITERATIONS", 10000);
  const auto known = kKnownFindings.find(t.name);
  uint64_t known_seen = 0;
  Random random(env_number("ORTFLEET_FUZZ_SEED", 1) * 1000003 + std::hash<std::string>{}(t.name));
  for (uint64_t i = 0; i < iterations; ++i) {
    const std::string input = mutate(random, seeds);
    try {
      run_one(t, input);
    } catch (const std::exception& e) {
      if (known != kKnownFindings.end() && std::string(e.what()).find(known->second) != std::string::npos) {
        ++known_seen;
        continue;
      }
      const auto saved = std::filesystem::temp_directory_path() / (std::string("ortfleet-fuzz-finding-") + t.name);
      std::ofstream(saved, std::ios::binary) << input;
      ADD_FAILURE() << t.name << " threw a foreign exception on iteration " << i << ": " << e.what()
                    << " (input saved to " << saved.string() << ")";
    }
  }
  if (known != kKnownFindings.end()) {
    EXPECT_GT(known_seen, 0u) << t.name << ": the known finding '" << known->second
                              << "' no longer occurs; remove it from kKnownFindings";
    if (known_seen > 0) std::cout << t.name << ": known finding '" << known->second << "' seen " << known_seen << " times\n";
  }
}

std::vector<const Target*> all_targets() {
  std::vector<const Target*> out;
  for (const auto& t : targets()) out.push_back(&t);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Parsers, FuzzTarget, ::testing::ValuesIn(all_targets()),
                         [](const auto& param_info) { return std::string(param_info.param->name); });

}  // namespace
}  // namespace ortfleet::fuzz
