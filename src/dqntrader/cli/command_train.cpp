#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/train/training_run.hpp"

namespace dqntrader::cli {

Command add_train(CLI::App& app) {
  struct Options {
    train::TrainConfig config;
    std::string config_file, resume;
    bool force = false;
    SettingFlags flags;
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app = app.add_subcommand("train",
                                   "train a DQN trading agent on the device and validate it every "
                                   "epoch; without --data it trains on the "
                                   "built-in synthetic market");
  CLI::App* c = command.app;
  c->add_option(
      "--config", options->config_file,
      "JSON file of settings (keys as the flags below, without --); flags given here override it");
  c->add_option(
      "--resume", options->resume,
      "continue the run in this directory from its newest valid checkpoint (its config.json gives "
      "the settings; flags given here override them, e.g. --epochs)");
  c->add_flag(
      "--force", options->force,
      "with --resume: continue even when settings or data differ from the checkpoint's (says what "
      "differs); without: start again in an --out that holds a run, removing its files first");
  options->flags.add(c, options->config, [](const train::Setting& s) { return s.help; });
  command.run = [options, c](const ExecSpace& space) {
    if (!options->resume.empty()) {
      if (!options->config_file.empty()) {
        throw InputError("--resume takes the settings from the run's config.json; drop --config");
      }
      train::apply_settings_json(options->config, options->resume + "/config.json");
      options->config.out = options->resume;
    }
    if (!options->config_file.empty())
      train::apply_settings_json(options->config, options->config_file);
    options->flags.apply(options->config);
    refuse_test_fraction_beside_test_data(*c, options->config);
    if (!options->resume.empty() && options->config.out != options->resume) {
      throw InputError("--resume continues in the run's own directory; drop --out");
    }
    train::run_training(space, options->config, std::cerr,
                        train::ResumeOptions{!options->resume.empty(), options->force});
  };
  return command;
}

}  // namespace dqntrader::cli
