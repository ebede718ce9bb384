#ifndef TANDEM_CMOSQUITTO_SHIM_H
#define TANDEM_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
/* TandemMQTT wakes its poll(2) loop with an eventfd (MQTTClient.swift, kick()). */
#include <sys/eventfd.h>
#endif
