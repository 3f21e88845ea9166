// Runs a fuzz target's LLVMFuzzerTestOneInput over every file of its seed corpus, so that builds
// without libFuzzer (g++) still check the target's invariants. Usage: NAME_replay DIR...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  size_t files = 0;
  for (int i = 1; i < argc; ++i) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(argv[i])) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
      // Copy to an exact-size heap buffer so ASan catches any read past the end.
      auto* exact = new uint8_t[bytes.size() ? bytes.size() : 1];
      std::copy(bytes.begin(), bytes.end(), exact);
      LLVMFuzzerTestOneInput(exact, bytes.size());
      delete[] exact;
      ++files;
    }
  }
  std::printf("replayed %zu inputs\n", files);
  return files == 0 ? 1 : 0;
}
