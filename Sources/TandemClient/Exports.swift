// What an app needs beside the client itself (Sticker, Frame, Receipt, Device, Millis,
// the workout and conversation types) comes with `import TandemClient`: the types live
// in TandemCore, which apps then need not import themselves.
@_exported import TandemCore
// TLS settings for the initialiser that builds its own libmosquitto transport.
@_exported import struct TandemMQTT.MQTTTLS
