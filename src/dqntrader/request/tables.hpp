// The tables of the requests (requests.cpp gathers them for tables()), each beside the code
// that reads what was given against it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dqntrader/request/options.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::request {

/// An option of the given kind, with the value it refuses and its default as help shows it.
inline Option option(const std::string& name, Kind kind, const std::string& help,
                     const std::string& refused, const std::string& default_text = {}) {
  Option o;
  o.name = name;
  o.kind = kind;
  o.help = help;
  o.refused = refused;
  o.default_text = default_text;
  return o;
}

Table train_table();
Table sweep_table();
Table backtest_table();
Table act_table();
#if defined(DQNTRADER_WITH_ONNX)
Table export_table();
#endif
Table synth_table();
Table report_table();

/// The training settings as options (Option::setting), each with help(setting) as its help.
std::vector<Option> setting_options(const train::TrainConfig& defaults,
                                    const std::function<std::string(const train::Setting&)>& help);

/// Sets in config the training settings given (a setting's reader checks its value, naming it).
void apply_given_settings(const Table& table, const Given& given, train::TrainConfig& config);

/// test-fraction cuts the test window off the data; a test-data file is the test window.
Exclusion test_fraction_beside_test_data();

/// InputError when test-fraction is given and a settings file names a test-data file: the file
/// is the test window, and the fraction would be silently ignored.
void refuse_test_fraction_beside_test_data(const Given& given, const train::TrainConfig& config);

}  // namespace dqntrader::request
