// A Kafka cluster for the tests: librdkafka's mock cluster (brokers on 127.0.0.1, real TCP
// ports, transactions and idempotence), kept alive in this process. No Kafka broker is
// installable on the test machines; clients (ferry, kcat) connect to it as to any cluster.
//
//   ferry_kafka_mock [--brokers N] [--partitions N]   (N partitions: the `topic` command's default)
//
// Prints "bootstrap <host:port,...>" on stdout once the brokers listen, then reads commands on
// stdin, one a line, answering "ok" or "error <message>":
//   topic <name> [partitions]          creates a topic (topics a producer asks for are created
//                                      with 4 partitions; the mock keeps 5 MB a partition)
//   errors <api key> <error code>...   the next requests of that API (all brokers) fail with
//                                      these errors, one each (rd_kafka_mock_push_request_errors)
//   clear <api key>                    drops the errors still pushed for that API
//   quit                               (or end of input) stops the cluster
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  int brokers = 1;
  int partitions = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--brokers") {
      brokers = std::atoi(argv[i + 1]);
    } else if (flag == "--partitions") {
      partitions = std::atoi(argv[i + 1]);
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "log_level", "3", err, sizeof(err)) != RD_KAFKA_CONF_OK) {
    std::cerr << err << "\n";
    return 1;
  }
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  if (rk == nullptr) {
    std::cerr << "rd_kafka_new: " << err << "\n";
    return 1;
  }
  rd_kafka_mock_cluster_t* mc = rd_kafka_mock_cluster_new(rk, brokers);
  if (mc == nullptr) {
    std::cerr << "could not start the mock cluster\n";
    return 1;
  }
  std::cout << "bootstrap " << rd_kafka_mock_cluster_bootstraps(mc) << std::endl;

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd.empty()) continue;
    if (cmd == "quit") break;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (cmd == "topic") {
      std::string name;
      int n = partitions;
      in >> name >> n;
      e = rd_kafka_mock_topic_create(mc, name.c_str(), n, 1);
    } else if (cmd == "errors") {
      int16_t api = -1;
      in >> api;
      std::vector<rd_kafka_resp_err_t> errs;
      int code = 0;
      while (in >> code) errs.push_back(static_cast<rd_kafka_resp_err_t>(code));
      rd_kafka_mock_push_request_errors_array(mc, api, errs.size(), errs.data());
    } else if (cmd == "clear") {
      int16_t api = -1;
      in >> api;
      rd_kafka_mock_clear_request_errors(mc, api);
    } else {
      std::cout << "error unknown command " << cmd << std::endl;
      continue;
    }
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::cout << "error " << rd_kafka_err2str(e) << std::endl;
    } else {
      std::cout << "ok" << std::endl;
    }
  }
  rd_kafka_mock_cluster_destroy(mc);
  rd_kafka_destroy(rk);
  return 0;
}
