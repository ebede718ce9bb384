#ifndef TANDEM_CMOSQUITTO_SHIM_H
#define TANDEM_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
