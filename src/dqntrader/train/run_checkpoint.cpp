#include "dqntrader/train/run_checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "dqntrader/core/error.hpp"
#include "dqntrader/io/record.hpp"

namespace dqntrader::train {

namespace {

std::string member_section(const char* name, std::size_t m) {
  return std::string(name) + "/" + std::to_string(m);
}

template <class T>
io::Section pod(const std::string& name, const T& value) {
  return {name, std::string(reinterpret_cast<const char*>(&value), sizeof(T))};
}

template <class T>
T read_pod(const io::Section& s, const std::string& source) {
  if (s.bytes.size() != sizeof(T))
    throw InputError(source, 0, 0, "bad section '" + s.name + "'");
  T value;
  std::memcpy(&value, s.bytes.data(), sizeof(T));
  return value;
}

io::Section floats(const std::string& name, const std::vector<float>& values) {
  return {name,
          std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float))};
}

std::vector<float> read_floats(const io::Section& s, const std::string& source) {
  if (s.bytes.size() % sizeof(float) != 0)
    throw InputError(source, 0, 0, "bad section '" + s.name + "'");
  std::vector<float> values(s.bytes.size() / sizeof(float));
  std::memcpy(values.data(), s.bytes.data(), s.bytes.size());
  return values;
}

const io::Section* optional_section(const std::vector<io::Section>& sections,
                                    const std::string& name) {
  const auto found = std::find_if(sections.begin(), sections.end(),
                                  [&](const io::Section& s) { return s.name == name; });
  return found == sections.end() ? nullptr : &*found;
}

// Format 1's structs, as their bytes were (frozen: they are that format, whatever the structs
// become), each with the names of its fields in order. Every field is 8 bytes.
struct Format1 {
  const char* section;  // the section's name, before "/m" for a member's
  bool per_member;
  std::vector<std::pair<const char*, char>> fields;  // name, 'i' (int64) or 'd' (double)
};

const std::vector<Format1>& format1() {
  static const std::vector<Format1> structs = {
      {"run",
       true,
       {{"best_sharpe", 'd'},
        {"last_sharpe", 'd'},
        {"best_epoch", 'i'},
        {"since_best", 'i'},
        {"epoch", 'i'},
        {"done", 'i'},
        {"failed", 'i'},
        {"stopped_early", 'i'}}},
      {"best_metrics",
       true,
       {{"bars", 'i'},
        {"total_return", 'd'},
        {"log_return", 'd'},
        {"cagr", 'd'},
        {"annual_volatility", 'd'},
        {"sharpe", 'd'},
        {"sortino", 'd'},
        {"max_drawdown", 'd'},
        {"calmar", 'd'},
        {"trades_closed", 'i'},
        {"win_rate", 'd'},
        {"profit_factor", 'd'},
        {"expectancy", 'd'},
        {"turnover", 'd'},
        {"exposure", 'd'},
        {"total_cost", 'd'}}},
      {"host_counters", false, {{"steps", 'i'}, {"learning_steps", 'i'}, {"epoch", 'i'}}},
  };
  return structs;
}

}  // namespace

void upgrade(std::vector<io::Section>& sections, std::uint32_t format, const std::string& source) {
  if (format == kCheckpointFormat)
    return;
  if (format != 1) {
    throw InputError(source, 0, 0,
                     "checkpoint format " + std::to_string(format) +
                         " is newer than this dqntrader reads (formats 1 and " +
                         std::to_string(kCheckpointFormat) +
                         "): continue the run with the version that wrote it");
  }
  for (io::Section& s : sections) {
    const std::string base = s.name.substr(0, s.name.find('/'));
    const bool member = s.name.find('/') != std::string::npos;
    if (base == "member_counters" && !member) {
      // Two int64 per member, in member order.
      if (s.bytes.size() % 16 != 0)
        throw InputError(source, 0, 0, "bad section '" + s.name + "'");
      io::RecordWriter w;
      for (std::size_t m = 0; m < s.bytes.size() / 16; ++m) {
        std::int64_t v[2];
        std::memcpy(v, s.bytes.data() + 16 * m, 16);
        w("skipped_before." + std::to_string(m), v[0]);
        w("restores_before." + std::to_string(m), v[1]);
      }
      s.bytes = w.bytes();
      continue;
    }
    for (const Format1& f : format1()) {
      if (base != f.section || member != f.per_member)
        continue;
      if (s.bytes.size() != 8 * f.fields.size())
        throw InputError(source, 0, 0, "bad section '" + s.name + "'");
      io::RecordWriter w;
      for (std::size_t i = 0; i < f.fields.size(); ++i) {
        if (f.fields[i].second == 'i') {
          std::int64_t v;
          std::memcpy(&v, s.bytes.data() + 8 * i, 8);
          w(f.fields[i].first, v);
        } else {
          double v;
          std::memcpy(&v, s.bytes.data() + 8 * i, 8);
          w(f.fields[i].first, v);
        }
      }
      s.bytes = w.bytes();
    }
  }
}

void RunCheckpoint::append_to(std::vector<io::Section>& sections) const {
  sections.push_back(pod("members", static_cast<std::uint64_t>(members.size())));
  sections.push_back(pod("epoch", epoch));
  sections.push_back(pod("data_fingerprint", data_fingerprint));
  sections.push_back(pod("test_fingerprint", test_fingerprint.value_or(0)));
  for (std::size_t m = 0; m < members.size(); ++m) {
    const Member& member = members[m];
    sections.push_back({member_section("settings", m), member.settings.dump()});
    sections.push_back(io::record(member_section("run", m), member.state));
    sections.push_back(floats(member_section("best_parameters", m), member.best_parameters));
    sections.push_back(io::record(member_section("best_metrics", m), member.best_metrics));
    if (member.last_parameters)
      sections.push_back(floats(member_section("last_parameters", m), *member.last_parameters));
    sections.push_back({member_section("metrics.jsonl", m), member.metrics});
    sections.push_back({member_section("timings.jsonl", m), member.timings});
  }
}

RunCheckpoint RunCheckpoint::read(const std::vector<io::Section>& sections,
                                  const std::string& source) {
  auto section = [&](const std::string& name) -> const io::Section& {
    return io::find_section(sections, name, source);
  };
  RunCheckpoint c;
  const auto count = read_pod<std::uint64_t>(section("members"), source);
  c.epoch = read_pod<std::int64_t>(section("epoch"), source);
  c.data_fingerprint = read_pod<std::uint64_t>(section("data_fingerprint"), source);
  if (const io::Section* test = optional_section(sections, "test_fingerprint"))
    c.test_fingerprint = read_pod<std::uint64_t>(*test, source);
  for (std::size_t m = 0; m < count; ++m) {
    Member member;
    const std::string& settings = section(member_section("settings", m)).bytes;
    member.settings = nlohmann::json::parse(settings, nullptr, false);
    if (member.settings.is_discarded())
      throw InputError(source, 0, 0, "bad section '" + member_section("settings", m) + "'");
    member.state = io::read_record<MemberState>(section(member_section("run", m)), source);
    member.best_parameters = read_floats(section(member_section("best_parameters", m)), source);
    member.best_metrics =
        io::read_record<eval::WindowMetrics>(section(member_section("best_metrics", m)), source);
    if (const io::Section* last = optional_section(sections, member_section("last_parameters", m)))
      member.last_parameters = read_floats(*last, source);
    member.metrics = section(member_section("metrics.jsonl", m)).bytes;
    member.timings = section(member_section("timings.jsonl", m)).bytes;
    c.members.push_back(std::move(member));
  }
  return c;
}

nlohmann::json identity(TrainConfig config) {
  nlohmann::json j = nlohmann::json::parse(settings_json(config));
  for (const char* key : {"out", "epochs", "patience", "checkpoints", "fault-budget",
                          "inject-fault", "graph-steps"}) {
    j.erase(key);
  }
  return j;
}

std::vector<std::string> checkpoint_paths(const std::string& directory) {
  std::vector<std::pair<long, std::string>> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "checkpoint-", suffix = ".dqnckpt";
    if (name.size() > prefix.size() + suffix.size() &&
        name.compare(0, prefix.size(), prefix) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string digits =
          name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
      if (digits.find_first_not_of("0123456789") == std::string::npos)
        found.push_back({std::stol(digits), entry.path().string()});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> paths;
  for (const auto& f : found)
    paths.push_back(f.second);
  return paths;
}

}  // namespace dqntrader::train
