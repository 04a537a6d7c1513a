// Dependencies point downwards only: every `#include "..."` of src/, backends/ and python/ names
// a file of its own layer or of a layer below it in the table of docs/ARCHITECTURE.md
// ("Layers"), which is this test's input, so that the document and the code cannot drift apart.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace dqntrader {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = DQNTRADER_SOURCE_DIR;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The layers from the bottom up, each with the paths (relative to the root) that are its own.
struct Layer {
  std::string name;
  std::vector<std::string> paths;
};

std::vector<Layer> layer_table(const std::string& architecture) {
  std::vector<Layer> layers;
  const std::size_t section = architecture.find("\n## Layers\n");
  if (section == std::string::npos)
    return layers;
  std::istringstream in(architecture.substr(section + 1));
  std::string line;
  std::getline(in, line);  // the heading
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0)
      break;
    if (line.rfind("|", 0) != 0) {
      if (in_table)
        break;
      continue;
    }
    in_table = true;
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');)
      cells.push_back(cell);
    if (cells.size() < 2 || cells[0].find("layer") != std::string::npos ||
        cells[0].find("---") != std::string::npos)
      continue;
    Layer layer;
    layer.name = cells[0].substr(cells[0].find_first_not_of(' '));
    layer.name = layer.name.substr(0, layer.name.find_last_not_of(' ') + 1);
    // Its paths: the cell's `quoted` runs.
    for (std::size_t open = cells[1].find('`'); open != std::string::npos;) {
      const std::size_t close = cells[1].find('`', open + 1);
      if (close == std::string::npos)
        break;
      layer.paths.push_back(cells[1].substr(open + 1, close - open - 1));
      open = cells[1].find('`', close + 1);
    }
    layers.push_back(layer);
  }
  return layers;
}

// The layer of a path relative to the root: the row with the longest of its paths that
// begins it (-1 for none).
int layer_of(const std::vector<Layer>& layers, const std::string& path) {
  int best = -1;
  std::size_t longest = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    for (const std::string& p : layers[l].paths) {
      if (path.rfind(p, 0) == 0 && p.size() > longest) {
        longest = p.size();
        best = static_cast<int>(l);
      }
    }
  }
  return best;
}

// The file an include names, relative to the root: beside the including file, or under src/
// (dqntrader/...), or under the root (backends/...); a file that exists in none of them (one
// the build generates) is taken where its name says.
std::string resolve(const std::string& file, const std::string& included) {
  for (const fs::path& base : {fs::path(file).parent_path(), fs::path("src"), fs::path("")}) {
    const fs::path candidate = (base / included).lexically_normal();
    if (fs::exists(kRoot / candidate))
      return candidate.generic_string();
  }
  return (included.rfind("dqntrader/", 0) == 0 ? fs::path("src") / included : fs::path(included))
      .lexically_normal()
      .generic_string();
}

// The file a line includes as #include "file" (spaces allowed around '#' and 'include'), or "".
std::string quoted_include(const std::string& line) {
  std::size_t at = line.find_first_not_of(" \t");
  if (at == std::string::npos || line[at] != '#')
    return "";
  at = line.find_first_not_of(" \t", at + 1);
  if (at == std::string::npos || line.compare(at, 7, "include") != 0)
    return "";
  at = line.find_first_not_of(" \t", at + 7);
  if (at == std::string::npos || line[at] != '"')
    return "";
  const std::size_t close = line.find('"', at + 1);
  return close == std::string::npos ? "" : line.substr(at + 1, close - at - 1);
}

// Every include of files (path -> content) that points up the table, and every file in no
// layer, as one line each.
std::vector<std::string> violations(const std::vector<Layer>& layers,
                                    const std::map<std::string, std::string>& files) {
  std::vector<std::string> out;
  for (const auto& [file, content] : files) {
    const int own = layer_of(layers, file);
    if (own < 0) {
      out.push_back(file + ": in no layer of docs/ARCHITECTURE.md");
      continue;
    }
    std::istringstream lines(content);
    for (std::string line; std::getline(lines, line);) {
      const std::string included = quoted_include(line);
      if (included.empty())
        continue;
      const std::string target = resolve(file, included);
      const int theirs = layer_of(layers, target);
      if (theirs > own) {
        out.push_back(file + " (" + layers[own].name + ") includes " + target + " (" +
                      layers[theirs].name + ")");
      }
    }
  }
  return out;
}

std::map<std::string, std::string> sources() {
  std::map<std::string, std::string> files;
  for (const char* top : {"src", "backends", "python"}) {
    for (const auto& entry : fs::recursive_directory_iterator(kRoot / top)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() &&
          (ext == ".hpp" || ext == ".cpp" || ext == ".h" || ext == ".in"))
        files[fs::relative(entry.path(), kRoot).generic_string()] = read(entry.path());
    }
  }
  return files;
}

TEST(Layers, EveryIncludePointsDownTheTableOfArchitecture) {
  const std::vector<Layer> layers = layer_table(read(kRoot / "docs" / "ARCHITECTURE.md"));
  ASSERT_GE(layers.size(), 8u) << "no layer table under '## Layers' in docs/ARCHITECTURE.md";
  const std::map<std::string, std::string> files = sources();
  ASSERT_GT(files.size(), 100u);
  std::string found;
  for (const std::string& v : violations(layers, files))
    found += "\n  " + v;
  EXPECT_TRUE(found.empty()) << "includes against docs/ARCHITECTURE.md's layers:" << found;
}

// The check finds what it is for: an include planted in a file of a lower layer, pointing up.
TEST(Layers, AnUpwardIncludeIsFound) {
  const std::vector<Layer> layers = layer_table(read(kRoot / "docs" / "ARCHITECTURE.md"));
  std::map<std::string, std::string> files = sources();
  const std::string lower = "src/dqntrader/data/bars.cpp";
  ASSERT_EQ(files.count(lower), 1u);
  files[lower] += "\n#include \"dqntrader/train/dqn_trainer.hpp\"\n";
  const std::vector<std::string> found = violations(layers, files);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0], lower + " (data) includes src/dqntrader/train/dqn_trainer.hpp (learning)");
  // A file in no layer is named too.
  files.erase(lower);
  files["src/dqntrader/elsewhere/new.cpp"] = "";
  const std::vector<std::string> unplaced = violations(layers, files);
  ASSERT_EQ(unplaced.size(), 1u);
  EXPECT_NE(unplaced[0].find("in no layer"), std::string::npos);
}

}  // namespace
}  // namespace dqntrader
