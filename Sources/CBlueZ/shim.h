#ifndef TRACER_CBLUEZ_SHIM_H
#define TRACER_CBLUEZ_SHIM_H

#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>

// Macros that Swift cannot import as constants are re-exposed as typed values.
static const int tracer_af_bluetooth = AF_BLUETOOTH;
static const int tracer_btproto_hci = BTPROTO_HCI;
static const unsigned short tracer_hci_channel_user = HCI_CHANNEL_USER;
static const unsigned short tracer_hci_dev_none = HCI_DEV_NONE;
static const unsigned short tracer_hci_channel_control = HCI_CHANNEL_CONTROL;

#endif
