#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

using namespace tilemix;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

TEST_CASE("only regular files are read: directories, devices and FIFOs are input errors", "[inputs]") {
  const fs::path dir = fs::temp_directory_path() / ("tilemix-input-file-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "f.json").string(), fifo = (dir / "fifo").string();
  std::ofstream(file) << "12345";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);

  CHECK(regular_file_size(file, "a JSON file") == 5);
  CHECK_THROWS_WITH(regular_file_size(dir.string(), "a JSON file"),
                    dir.string() + ": is a directory, expected a JSON file");
  // Opening a FIFO would wait for a writer; reading /dev/zero would never end.
  CHECK_THROWS_WITH(regular_file_size(fifo, "a .npy file"),
                    fifo + ": is not a regular file (a device, FIFO or socket), expected a .npy file");
  CHECK_THROWS_WITH(regular_file_size("/dev/zero", "a JSON file"), Contains("/dev/zero: is not a regular file"));
  CHECK_THROWS_AS(regular_file_size((dir / "missing").string(), "a JSON file"), InputError);
  CHECK_THROWS_WITH(regular_file_size((dir / "missing").string(), "a JSON file"),
                    Contains("missing: cannot open file: No such file or directory"));
  fs::remove_all(dir);
}
