#include <iostream>
#include <memory>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/request/requests.hpp"
#include "dqntrader/train/training_run.hpp"

namespace dqntrader::cli {

Command add_train(CLI::App& app) {
  auto flags = std::make_shared<RequestFlags>();
  Command command;
  command.app = flags->add(app, request::table("train"));
  command.run = [flags](const ExecSpace& space) {
    const request::TrainRequest r = request::train_request(flags->given());
    train::run_training(space, r.config, std::cerr, train::ResumeOptions{r.resume, r.force});
  };
  return command;
}

}  // namespace dqntrader::cli
