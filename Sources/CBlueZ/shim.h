#ifndef TRACER_CBLUEZ_SHIM_H
#define TRACER_CBLUEZ_SHIM_H

#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <string.h>
#include <sys/ioctl.h>

// Macros that Swift cannot import as constants are re-exposed as typed values.
static const int tracer_af_bluetooth = AF_BLUETOOTH;
static const int tracer_btproto_hci = BTPROTO_HCI;
static const unsigned short tracer_hci_channel_user = HCI_CHANNEL_USER;
static const unsigned short tracer_hci_dev_none = HCI_DEV_NONE;
static const unsigned short tracer_hci_channel_control = HCI_CHANNEL_CONTROL;

// The kernel's adapters as hciconfig sees them (HCIGETDEVLIST on an unbound HCI socket): these
// include adapters a user channel holds, which the management interface hides. Fills up to
// HCI_MAX_DEV ids and flags (bit HCI_UP: up) and returns how many, or -1 with errno set.
static const int tracer_hci_max_dev = HCI_MAX_DEV;
static const unsigned int tracer_hci_up_flag = 1u << HCI_UP;
static inline int tracer_hci_device_list(int descriptor, unsigned short ids[HCI_MAX_DEV], unsigned int flags[HCI_MAX_DEV]) {
    struct {
        uint16_t dev_num;
        struct hci_dev_req dev_req[HCI_MAX_DEV];
    } request;
    memset(&request, 0, sizeof request);
    request.dev_num = HCI_MAX_DEV;
    if (ioctl(descriptor, HCIGETDEVLIST, &request) < 0) return -1;
    for (int i = 0; i < request.dev_num && i < HCI_MAX_DEV; i++) {
        ids[i] = request.dev_req[i].dev_id;
        flags[i] = (unsigned int)request.dev_req[i].dev_opt;
    }
    return request.dev_num;
}

// One adapter's address (least significant byte first, as the kernel keeps it) and flags
// (HCIGETDEVINFO); 0, or -1 with errno set.
static inline int tracer_hci_device_info(int descriptor, unsigned short id, unsigned char address[6], unsigned int *flags) {
    struct hci_dev_info info;
    memset(&info, 0, sizeof info);
    info.dev_id = id;
    if (ioctl(descriptor, HCIGETDEVINFO, &info) < 0) return -1;
    memcpy(address, &info.bdaddr, 6);
    *flags = info.flags;
    return 0;
}

#endif
